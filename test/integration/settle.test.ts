/**
 * Every settle is conditional (invariant 13, docs/architecture.md#invariants): a write that finishes, fails, retries or
 * moves a task names the state it expects, so a cancel that won the row lock is never undone by a
 * run that lost it. Real MariaDB; effects are counted in a ledger, a row per run with a unique key.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { StateMoved } from '../../src/lifecycle/expect.js';
import { recoverExpiredLeases } from '../../src/lifecycle/repair.js';
import * as run from '../../src/lifecycle/run.js';
import { TaskStore } from '../../src/store/task-store.js';
import type { Task } from '../../src/store/task-types.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('settle');
let database: Database;
let store: TaskStore;

/** Long enough for the test to see the cancel wait for the row on a loaded machine, short enough to wait out. */
const OVERRUN_MS = 3000;

/** The ids of the tasks whose handler started. */
const started = new Set<number>();

/** Writes its run in the ledger, then hangs past its time: its connection is killed, the write rolled back. */
const overrun = testHandler(
  'overrun',
  async ({ tx, task }) => {
    await tx.execute(sql`INSERT INTO run_ledger (task_id, attempt) VALUES (${task.id}, ${task.attempts + 1})`);
    started.add(task.id);
    await tx.execute(sql`SELECT SLEEP(60)`);
  },
  OVERRUN_MS,
);

beforeAll(async () => {
  await fixture.db.execute('CREATE TABLE run_ledger (task_id BIGINT NOT NULL, attempt INT NOT NULL, UNIQUE KEY run (task_id, attempt))');
  database = new Database({ url: fixture.db.url, poolSize: 4, lockWaitTimeoutS: 5 });
  store = new TaskStore(database);
});

afterAll(async () => {
  await database?.close();
});

/**
 * Whether a statement of this database matching `pattern` is running now (waiting for a row lock,
 * here). PROCESSLIST is read live, where INNODB_TRX is a cached snapshot that can miss a wait.
 */
async function running(pattern: string): Promise<boolean> {
  const [row] = await fixture.db.query<any[]>(
    `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
      WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE ?`,
    [fixture.db.name, pattern],
  );
  return Number(row.n) > 0;
}

/** A change that waits for the row while the handler holds it, and what the task must stay as once it won. */
const changes = [
  {
    name: 'cancel',
    request: (id: number) => ({ url: `/tasks/${id}/cancel`, body: undefined }),
    statement: "UPDATE punctual_tasks SET status = 'cancelled'%",
    after: { status: 'cancelled' },
  },
  {
    name: 'reschedule',
    request: (id: number) => ({ url: `/tasks/${id}/reschedule`, body: { runAt: '2031-01-01T00:00:00.000Z' } }),
    statement: "UPDATE punctual_tasks SET run_at = '2031-01-01%",
    after: { status: 'pending', runAt: '2031-01-01T00:00:00.000Z' },
  },
];

describe('a database handler that overran', () => {
  it.each(changes)('does not undo a $name that waited for its row: the change stays, the effect is not committed', async (change) => {
    fixture.service = await fixture.start({}, { handlers: [overrun] });
    const { body: task } = await fixture.service.call('POST', '/tasks', { type: 'overrun', payload: {}, delayMs: 0 });
    await waitFor(async () => started.has(task.id), OVERRUN_MS, 'the handler to start');
    // The handler holds the task's row (its claim): the change waits for it, seen live in PROCESSLIST.
    const { url, body } = change.request(task.id);
    const changed = fixture.service.call('POST', url, body);
    await waitFor(() => running(change.statement), OVERRUN_MS, `the ${change.name} to wait`);
    // The overrun kills the handler's connection: the claim rolls back, the change takes the row.
    const answer = await changed;
    expect(answer).toMatchObject({ status: 200, body: change.after });
    // The dispatcher has recorded the overrun on its own, after the change.
    await waitFor(
      async () => fixture.service!.logs.some((line) => line.taskId === task.id && /^task (will be retried|failed)$/.test(String(line.msg))),
      10_000,
      'the overrun to be recorded',
    );
    const now = (await fixture.service.call('GET', `/tasks/${task.id}`)).body;
    expect(now).toMatchObject({ ...change.after, attempts: 0, lastError: null });
    expect(await fixture.db.query<any[]>('SELECT * FROM run_ledger WHERE task_id = ?', [task.id])).toEqual([]);
    // No retry was armed for it: the failure was not written.
    expect(fixture.service.timers.has(task.id)).toBe(false);
  });
});

/** A fixed "now" well in the future of the wall clock, so nothing here is due by accident. */
const NOW = Date.parse('2030-03-01T12:00:00.000Z');
const call = { httpStatus: 500, durationMs: 5, responseBytes: 2 };

/** A task inserted straight into the table with `columns`, read back as the store reads it. */
async function taskWith(columns: Record<string, unknown>): Promise<Task> {
  const all = { type: 'overrun', payload: '{}', run_at: new Date(NOW - 1000), ...columns };
  const names = Object.keys(all);
  const { insertId } = await fixture.db.execute(`INSERT INTO punctual_tasks (${names.join(', ')}) VALUES (?)`, [
    names.map((name) => all[name as keyof typeof all]),
  ]);
  return (await store.reads.get(insertId))!;
}

/** Every column of a task's row, to see that a refused write changed nothing. */
async function rowOf(id: number): Promise<Record<string, unknown>> {
  const [row] = await fixture.db.query<any[]>('SELECT * FROM punctual_tasks WHERE id = ?', [id]);
  return { ...row };
}

const leased = (owner: string, attempts: number) => ({
  status: 'running',
  attempts,
  lease_owner: owner,
  lease_until: new Date(NOW + 60_000),
});
const failure = (task: Task) => ({ id: task.id, error: 'late', retryAt: NOW + 1000 });

/**
 * Each write that settles or moves a task, given a task that is no longer in the state it expects
 * (another transaction changed it first): it writes nothing and says so.
 */
const refusals: {
  name: string;
  /** The row's columns when the task was read. */
  as: Record<string, unknown>;
  /** What another transaction changed after the task was read (its id the one ?). */
  meanwhile?: string;
  write: (task: Task) => Promise<number | boolean>;
}[] = [
  {
    name: 'markDone on a cancelled task',
    as: { status: 'cancelled' },
    write: (t) => store.transaction((c) => store.runs.markDone(c, [t.id], NOW)),
  },
  {
    name: 'markRunning on a task done meanwhile',
    as: { status: 'done' },
    write: (t) => store.transaction((c) => store.runs.markRunning(c, [t.id], 'me', NOW + 60_000, NOW)),
  },
  {
    name: 'failClaimed on a cancelled task',
    as: { status: 'cancelled' },
    write: (t) => store.transaction((c) => store.runs.failClaimed(c, failure(t), t, NOW)),
  },
  {
    name: 'failClaimed on a task rescheduled meanwhile',
    as: {},
    meanwhile: 'UPDATE punctual_tasks SET run_at = run_at + INTERVAL 1 MINUTE WHERE id = ?',
    write: (t) => store.transaction((c) => store.runs.failClaimed(c, failure(t), t, NOW)),
  },
  {
    name: 'failClaimed on a task another process ran and retried meanwhile',
    as: {},
    meanwhile: 'UPDATE punctual_tasks SET attempts = attempts + 1 WHERE id = ?',
    write: (t) => store.transaction((c) => store.runs.failClaimed(c, failure(t), t, NOW)),
  },
  {
    name: "failLeased on another owner's lease",
    as: leased('other', 1),
    write: (t) => store.transaction((c) => store.runs.failLeased(c, failure(t), { id: t.id, owner: 'me', attempts: 1 }, call, NOW)),
  },
  {
    name: 'failLeased on a later run under the same owner',
    as: leased('me', 2),
    write: (t) => store.transaction((c) => store.runs.failLeased(c, failure(t), { id: t.id, owner: 'me', attempts: 1 }, call, NOW)),
  },
  {
    name: 'completeLeased on a later run under the same owner',
    as: leased('me', 2),
    write: (t) => store.transaction((c) => store.runs.completeLeased(c, { id: t.id, owner: 'me', attempts: 1 }, call, NOW)),
  },
  {
    name: 'completeLeased on a cancelled task',
    as: { status: 'cancelled' },
    write: (t) => store.transaction((c) => store.runs.completeLeased(c, { id: t.id, owner: 'me', attempts: 0 }, call, NOW)),
  },
  {
    name: 'markSkipped on a done task',
    as: { status: 'done' },
    write: (t) => store.transaction((c) => store.runs.markSkipped(c, [t.id], 'x', NOW)),
  },
  {
    name: 'moveTo on a cancelled task',
    as: { status: 'cancelled' },
    write: (t) => store.transaction((c) => store.changes.moveTo(c, [t.id], NOW, 'UTC', NOW)),
  },
  {
    name: 'shiftBy on a done task',
    as: { status: 'done' },
    write: (t) => store.transaction((c) => store.changes.shiftBy(c, [t.id], 1000, 'r1', NOW)),
  },
  {
    name: 'releaseExpiredLeases on a lease renewed meanwhile',
    as: leased('other', 1),
    write: (t) => store.transaction((c) => store.runs.releaseExpiredLeases(c, [t.id], NOW)),
  },
  {
    name: 'failExpiredLeases on a task that finished meanwhile',
    as: { status: 'done', attempts: 1 },
    write: (t) => store.transaction((c) => store.runs.failExpiredLeases(c, [t.id], NOW)),
  },
];

describe('every settle names the state it expects', () => {
  it.each(refusals)('$name writes nothing and says so', async ({ as, meanwhile, write }) => {
    const task = await taskWith(as);
    if (meanwhile !== undefined) await fixture.db.execute(meanwhile, [task.id]);
    const before = await rowOf(task.id);
    const written = await write(task);
    expect(written === false || written === 0).toBe(true);
    expect(await rowOf(task.id)).toEqual(before);
  });

  it('rolls back a batch whose locked task was not as its lock found it, the handler writes with it', async () => {
    const task = await taskWith({ status: 'pending' });
    await expect(
      store.transaction(async (conn) => {
        await conn.query('INSERT INTO run_ledger (task_id, attempt) VALUES (?, 1)', [task.id]);
        // As on an engine whose locking read did not lock: another run finished it in between.
        await fixture.db.execute("UPDATE punctual_tasks SET status = 'done' WHERE id = ?", [task.id]);
        return run.complete(store, conn, [task], NOW);
      }),
    ).rejects.toBeInstanceOf(StateMoved);
    expect(await fixture.db.query<any[]>('SELECT * FROM run_ledger WHERE task_id = ?', [task.id])).toEqual([]);
    expect((await rowOf(task.id)).attempts).toBe(0);
  });

  it('leaves a lease renewed after the repair read it', async () => {
    const task = await taskWith({ ...leased('gone', 1), lease_until: new Date(NOW - 1000) });
    // The repair read the lease as run out; its owner renewed it before the repair took the row.
    const renew = store.reads.expiredLeaseIds.bind(store.reads);
    store.reads.expiredLeaseIds = async (now, shards) => {
      const ids = await renew(now, shards);
      await fixture.db.execute('UPDATE punctual_tasks SET lease_until = ? WHERE id = ?', [new Date(NOW + 60_000), task.id]);
      return ids;
    };
    try {
      expect(await recoverExpiredLeases(store, NOW)).toEqual({ recovered: 0, failed: 0, effects: [] });
    } finally {
      store.reads.expiredLeaseIds = renew;
    }
    expect(await rowOf(task.id)).toMatchObject({ status: 'running', lease_owner: 'gone' });
  });
});
