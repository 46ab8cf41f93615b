/**
 * Each transition of the lifecycle against a real database: the rows it writes and the timer
 * effects it returns (it arms nothing itself). The Lifecycle class is checked for applying those
 * effects once, after COMMIT, and never after a rollback.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { cancel, reschedule, retry } from '../../src/lifecycle/change.js';
import { create } from '../../src/lifecycle/create.js';
import { arm, armCreated, disarm, type TimerEffect } from '../../src/lifecycle/effects.js';
import { inBatchTransaction } from '../../src/dispatch/batch-try.js';
import { Lifecycle } from '../../src/lifecycle/lifecycle.js';
import { recoverExpiredLeases, skipMisfired } from '../../src/lifecycle/repair.js';
import * as run from '../../src/lifecycle/run.js';
import { nextOccurrence } from '../../src/time/recurrence.js';
import { TaskStore } from '../../src/store/task-store.js';
import type { NewTask, Task } from '../../src/store/task-types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let database: Database;
let store: TaskStore;

/** A fixed "now" well in the future of the wall clock, so nothing here is due by accident. */
const NOW = Date.parse('2030-03-01T12:00:00.000Z');
const policy = { baseMs: 1000, maxMs: 60_000, random: () => 0 };

beforeAll(async () => {
  db = await createTestDatabase('lifecycle');
  database = new Database({ url: db.url, poolSize: 4, lockWaitTimeoutS: 5 });
  store = new TaskStore(database);
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
});

let serial = 0;
function newTask(overrides: Partial<NewTask> = {}): NewTask {
  serial++;
  return {
    key: null,
    type: 'close_order',
    payload: { orderSn: `SN${serial}` },
    runAt: NOW + 60_000,
    timezone: 'UTC',
    maxAttempts: 3,
    misfire: 'run',
    cron: null,
    ...overrides,
  };
}

async function inserted(overrides: Partial<NewTask> = {}): Promise<Task> {
  const result = await create(store, { task: newTask(overrides) }, NOW);
  return result.task;
}

/** Sets columns straight in the table (a state a test starts from). */
async function setRow(id: number, columns: Record<string, unknown>): Promise<void> {
  const names = Object.keys(columns);
  await db.execute(`UPDATE punctual_tasks SET ${names.map((name) => `${name} = ?`).join(', ')} WHERE id = ?`, [
    ...names.map((name) => columns[name]),
    id,
  ]);
}

async function row(id: number): Promise<Task> {
  const task = await store.reads.get(id);
  if (task === undefined) throw new Error(`no task ${id}`);
  return task;
}

describe('create', () => {
  it('inserts a pending row and asks for its timer', async () => {
    const result = await create(store, { task: newTask({ key: 'k-new' }) }, NOW);
    expect(result.outcome).toBe('created');
    // A create's timer may be armed here even in a shard another process owns (created-here.ts).
    expect(result.effects).toEqual([armCreated(result.task.id, NOW + 60_000, 0, 'close_order')]);
    const written = await row(result.task.id);
    expect(written).toMatchObject({ status: 'pending', runAt: NOW + 60_000, key: 'k-new', attempts: 0, createdAt: NOW });
  });

  it('answers the existing task for the same request again, a conflict for a different one, and writes nothing more', async () => {
    const first = await create(store, { task: newTask({ key: 'k-dup', payload: { orderSn: 'A' } }) }, NOW);
    const again = await create(store, { task: newTask({ key: 'k-dup', payload: { orderSn: 'A' } }) }, NOW + 5);
    expect(again).toEqual({ outcome: 'repeated', task: expect.objectContaining({ id: first.task.id }), effects: [] });
    const other = await create(store, { task: newTask({ key: 'k-dup', payload: { orderSn: 'B' } }) }, NOW + 5);
    expect(other.outcome).toBe('conflict');
    expect(other.task.id).toBe(first.task.id);
    expect(other.effects).toEqual([]);
    const [count] = await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE task_key = 'k-dup'");
    expect(Number(count.n)).toBe(1);
  });

  it('compares a delayMs with the existing task creation, not with now', async () => {
    const asked = (runAt: number) => newTask({ key: 'k-delay', payload: { orderSn: 'D' }, runAt });
    const first = await create(store, { task: asked(NOW + 500), delayMs: 500 }, NOW);
    const later = await create(store, { task: asked(NOW + 900), delayMs: 500 }, NOW + 400);
    expect(later.outcome).toBe('repeated');
    expect(later.task.id).toBe(first.task.id);
  });
});

describe('cancel', () => {
  it('cancels a pending task and asks to disarm it', async () => {
    const task = await inserted();
    const result = await cancel(store, task, NOW + 1);
    expect(result.outcome).toBe('changed');
    expect(result.effects).toEqual([disarm(task.id)]);
    expect(await row(task.id)).toMatchObject({ status: 'cancelled', finishedAt: NOW + 1 });
  });

  it('refuses a task that is not pending, changing nothing', async () => {
    const task = await inserted();
    await setRow(task.id, { status: 'done' });
    const result = await cancel(store, task, NOW + 1);
    expect(result).toMatchObject({ outcome: 'refused', task: { id: task.id, status: 'done' }, effects: [] });
    expect((await row(task.id)).finishedAt).toBeNull();
  });

  it("cancels a series' pending occurrence when given its finished first task", async () => {
    const first = await inserted({ cron: '0 * * * *', runAt: NOW });
    const effects = await store.transaction((conn) => run.complete(store, conn, [first], NOW));
    const next = (effects[0] as { id: number }).id;
    const result = await cancel(store, await row(first.id), NOW + 2);
    expect(result.outcome).toBe('changed');
    expect(result.effects).toEqual([disarm(next)]);
    expect((await row(next)).status).toBe('cancelled');
    expect((await row(first.id)).status).toBe('done');
  });
});

describe('reschedule and retry', () => {
  it('moves a pending task and asks for its new timer', async () => {
    const task = await inserted();
    const result = await reschedule(store, task, { runAt: NOW + 5000, timezone: 'Asia/Shanghai' }, NOW + 1);
    expect(result.effects).toEqual([arm(task.id, NOW + 5000, undefined, 'close_order')]);
    expect(await row(task.id)).toMatchObject({ status: 'pending', runAt: NOW + 5000, timezone: 'Asia/Shanghai', updatedAt: NOW + 1 });
  });

  it('refuses to move a task that is not pending', async () => {
    const task = await inserted();
    await setRow(task.id, { status: 'failed' });
    const result = await reschedule(store, task, { runAt: NOW + 5000, timezone: 'UTC' }, NOW + 1);
    expect(result).toMatchObject({ outcome: 'refused', effects: [] });
    expect((await row(task.id)).runAt).toBe(NOW + 60_000);
  });

  it('puts a failed task back to pending with its attempts reset, and asks for its timer', async () => {
    const task = await inserted();
    await setRow(task.id, { status: 'failed', attempts: 3, finished_at: new Date(NOW) });
    const result = await retry(store, task, { runAt: NOW + 10, timezone: 'UTC' }, NOW + 1);
    expect(result.effects).toEqual([arm(task.id, NOW + 10, undefined, 'close_order')]);
    expect(await row(task.id)).toMatchObject({ status: 'pending', attempts: 0, runAt: NOW + 10, finishedAt: null });
    const again = await retry(store, await row(task.id), { runAt: NOW + 10, timezone: 'UTC' }, NOW + 1);
    expect(again.outcome).toBe('refused');
  });
});

describe('claim, complete and fail', () => {
  it('claims only the pending tasks that are due, and leases the outside ones in the same transaction', async () => {
    const due = await inserted({ runAt: NOW - 10 });
    const later = await inserted({ runAt: NOW + 10_000 });
    const cancelled = await inserted({ runAt: NOW - 10 });
    await setRow(cancelled.id, { status: 'cancelled' });
    await store.transaction(async (conn) => {
      const claimed = await run.claim(store, conn, [due.id, later.id, cancelled.id], NOW);
      expect(claimed.map((task) => task.id)).toEqual([due.id]);
      await run.lease(store, conn, claimed, 'me', NOW + 30_000, NOW);
    });
    expect(await row(due.id)).toMatchObject({ status: 'running', attempts: 1, leaseOwner: 'me', leaseUntil: NOW + 30_000 });
    expect((await row(later.id)).status).toBe('pending');
  });

  it('completes tasks, and writes and arms the next occurrence of a recurring one', async () => {
    const once = await inserted({ runAt: NOW - 10 });
    const hourly = await inserted({ runAt: NOW - 10, cron: '0 * * * *' });
    const effects = await store.transaction((conn) => run.complete(store, conn, [once, hourly], NOW));
    expect(await row(once.id)).toMatchObject({ status: 'done', attempts: 1, finishedAt: NOW });
    expect((await row(hourly.id)).status).toBe('done');
    const nextAt = nextOccurrence('0 * * * *', 'UTC', NOW)!;
    const [next] = await db.query<any[]>('SELECT id FROM punctual_tasks WHERE series_id = ?', [hourly.id]);
    expect(effects).toEqual([arm(Number(next.id), nextAt, undefined, 'close_order')]);
    expect(await row(Number(next.id))).toMatchObject({ status: 'pending', runAt: nextAt, seriesId: hourly.id });
  });

  it('puts a failed run back with backoff, or fails it for good, and arms only the retry', async () => {
    const retried = await inserted({ runAt: NOW - 10 });
    const permanent = await inserted({ runAt: NOW - 10 });
    const failed = [
      { task: retried, failure: run.failureOf(policy, retried, 1, new Error('try again'), NOW) },
      { task: permanent, failure: run.failureOf(policy, permanent, 1, new PermanentError('no such order'), NOW) },
    ];
    expect(failed[0]!.failure.retryAt).toBe(NOW + 1000);
    expect(failed[1]!.failure.retryAt).toBeNull();
    const effects = await store.transaction((conn) => run.fail(store, conn, failed, NOW));
    expect(effects).toEqual([arm(retried.id, NOW + 1000, undefined, 'close_order')]);
    expect(await row(retried.id)).toMatchObject({ status: 'pending', attempts: 1, runAt: NOW + 1000, lastError: 'try again' });
    expect(await row(permanent.id)).toMatchObject({ status: 'failed', attempts: 1, finishedAt: NOW, lastError: 'no such order' });
  });

  it('fails a task for good on its last attempt', async () => {
    const task = await inserted({ runAt: NOW - 10, maxAttempts: 2 });
    await setRow(task.id, { attempts: 1 });
    expect(run.failureOf(policy, task, 2, new Error('again'), NOW).retryAt).toBeNull();
  });

  it("records an outside run's result only while its lease is this process's", async () => {
    const task = await inserted({ runAt: NOW - 10 });
    await store.transaction((conn) => run.lease(store, conn, [task], 'me', NOW + 30_000, NOW));
    const stranger = await run.completeLeased(store, task, 'someone else', { httpStatus: 200, durationMs: 3, responseBytes: 2 }, NOW + 5);
    expect(stranger).toEqual({ recorded: false, effects: [] });
    expect((await row(task.id)).status).toBe('running');
    const failure = run.failureOf(policy, task, 1, new Error('502'), NOW + 5);
    expect(await row(task.id)).toMatchObject({ lastHttpStatus: null, lastDurationMs: null, lastResponseBytes: null });
    const mine = await run.failLeased(store, task, failure, 'me', { httpStatus: 502, durationMs: 40, responseBytes: 11 }, NOW + 5);
    expect(mine).toEqual({ recorded: true, effects: [arm(task.id, NOW + 1005, undefined, 'close_order')] });
    // The claim counted the attempt: the failure does not count it again.
    expect(await row(task.id)).toMatchObject({ status: 'pending', attempts: 1, leaseOwner: null, runAt: NOW + 1005 });
    expect(await row(task.id)).toMatchObject({ lastHttpStatus: 502, lastDurationMs: 40, lastResponseBytes: 11 });
  });

  it('completes a leased run', async () => {
    const task = await inserted({ runAt: NOW - 10 });
    await store.transaction((conn) => run.lease(store, conn, [task], 'me', NOW + 30_000, NOW));
    const call = { httpStatus: 204, durationMs: 12, responseBytes: 0 };
    expect(await run.completeLeased(store, task, 'me', call, NOW + 5)).toEqual({ recorded: true, effects: [] });
    expect(await row(task.id)).toMatchObject({ status: 'done', attempts: 1, leaseOwner: null, finishedAt: NOW + 5 });
    expect(await row(task.id)).toMatchObject({ lastHttpStatus: 204, lastDurationMs: 12, lastResponseBytes: 0 });
  });
});

describe('repairs', () => {
  it('skips the overdue tasks that asked for it, asks to disarm them, and leaves the others', async () => {
    const skip = await inserted({ runAt: NOW - 60_000, misfire: 'skip' });
    const runIt = await inserted({ runAt: NOW - 60_000, misfire: 'run' });
    const recent = await inserted({ runAt: NOW - 10, misfire: 'skip' });
    const result = await skipMisfired(store, NOW - 1000, NOW);
    expect(result).toEqual({ skipped: 1, effects: [disarm(skip.id)] });
    expect(await row(skip.id)).toMatchObject({ status: 'skipped', finishedAt: NOW });
    expect((await row(runIt.id)).status).toBe('pending');
    expect((await row(recent.id)).status).toBe('pending');
  });

  it('puts a task whose lease ran out back to pending and arms it, or fails it on its last attempt', async () => {
    const again = await inserted({ runAt: NOW - 10 });
    const spent = await inserted({ runAt: NOW - 10, maxAttempts: 1 });
    const live = await inserted({ runAt: NOW - 10 });
    await store.transaction((conn) => run.lease(store, conn, [again, spent], 'gone', NOW - 1, NOW - 100));
    await store.transaction((conn) => run.lease(store, conn, [live], 'alive', NOW + 60_000, NOW - 100));
    const result = await recoverExpiredLeases(store, NOW);
    expect(result).toEqual({ recovered: 1, failed: 1, effects: [arm(again.id, NOW - 10, undefined, 'close_order')] });
    expect(await row(again.id)).toMatchObject({ status: 'pending', leaseOwner: null, attempts: 1 });
    expect(await row(spent.id)).toMatchObject({ status: 'failed', finishedAt: NOW });
    expect((await row(spent.id)).lastError).toMatch(/^lease expired on its last attempt/);
    expect(await row(live.id)).toMatchObject({ status: 'running', leaseOwner: 'alive' });
  });
});

describe('the Lifecycle applies the effects', () => {
  function lifecycle(applied: TimerEffect[][]) {
    return new Lifecycle({
      store,
      clock: { now: () => NOW },
      retry: policy,
      effects: { apply: (effects) => applied.push([...effects]) },
    });
  }

  it('once per transition, after its rows are written', async () => {
    const applied: TimerEffect[][] = [];
    const created = await lifecycle(applied).create({ task: newTask() });
    expect(applied).toEqual([[armCreated(created.task.id, NOW + 60_000, 0, 'close_order')]]);
    await lifecycle(applied).cancel(created.task);
    expect(applied[1]).toEqual([disarm(created.task.id)]);
  });

  it('after COMMIT of a run transaction, and not at all after a rollback', async () => {
    const applied: TimerEffect[][] = [];
    const task = await inserted({ runAt: NOW - 10 });
    const failure = run.failureOf(policy, task, 1, new Error('x'), NOW);
    await expect(
      inBatchTransaction(database, lifecycle(applied), async (tx) => {
        await tx.fail([{ task, failure }], NOW);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(applied).toEqual([]);
    expect((await row(task.id)).attempts).toBe(0);
    await inBatchTransaction(database, lifecycle(applied), async (tx) => {
      const claimed = await tx.claim([task.id], NOW);
      await tx.fail([{ task: claimed[0]!, failure }], NOW);
      expect(applied).toEqual([]); // not before COMMIT
    });
    expect(applied).toEqual([[arm(task.id, NOW + 1000, undefined, 'close_order')]]);
  });
});
