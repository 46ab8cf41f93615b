/**
 * A move into the past is refused unless the request says it means it (allowPast), and a run of a
 * task moved or created into the past is as late as the time since the move, not since 1970.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'past-moves-admin-token-0123456789';
const HOUR = 3_600_000;

let db: TestDatabase;
let service: TestService;

const call = (method: string, url: string, body?: unknown) => service.call(method, url, body, { authorization: `Bearer ${TOKEN}` });

async function create(extra: Record<string, unknown> = {}): Promise<any> {
  const { status, body } = await call('POST', '/tasks', { type: 'ledgered', payload: {}, delayMs: HOUR, ...extra });
  expect(status).toBe(201);
  return body;
}

async function read(id: number): Promise<any> {
  return (await call('GET', `/tasks/${id}`)).body;
}

async function ran(id: number): Promise<number> {
  return Number((await db.query<any[]>('SELECT COUNT(*) AS n FROM ledger WHERE task_id = ?', [id]))[0].n);
}

/** The task once done, and the lateness its run history records. */
async function doneRun(id: number): Promise<{ task: any; runLateness: number }> {
  const task = await waitFor(async () => {
    const now = await read(id);
    return now.status === 'done' ? now : undefined;
  });
  const runs = (await call('GET', `/tasks/${id}/runs`)).body;
  const list = Array.isArray(runs) ? runs : runs.runs;
  return { task, runLateness: list[0].startLatenessMs };
}

beforeAll(async () => {
  db = await createTestDatabase('past_moves');
  await db.execute('CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT NOT NULL)');
  service = await startTestService(
    db,
    { API_TOKEN: TOKEN, HORIZON_MS: String(HOUR * 2) },
    {
      handlers: [
        testHandler('ledgered', async ({ conn, task }) => {
          await conn.query('INSERT INTO ledger (task_id) VALUES (?)', [task.id]);
        }),
      ],
    },
  );
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
  await db.execute('DELETE FROM ledger');
});

describe('a reschedule into the past', () => {
  it('is refused with PUNCTUAL_RUN_AT_PAST and changes nothing', async () => {
    const task = await create();
    for (const runAt of ['1970-01-01T00:00:01Z', 1_000_000_000_000, new Date(Date.now() - 60_000).toISOString()]) {
      const { status, body } = await call('POST', `/tasks/${task.id}/reschedule`, { runAt });
      expect(status).toBe(400);
      expect(body.code).toBe('PUNCTUAL_RUN_AT_PAST');
      expect(body.message).toMatch(/^body\/runAt .* in the past; send allowPast: true/);
    }
    const after = await read(task.id);
    expect(after.runAt).toBe(task.runAt);
    expect(after.status).toBe('pending');
    expect(await ran(task.id)).toBe(0);
  });

  it('within a second of now is taken (the time the request took)', async () => {
    const task = await create();
    const { status } = await call('POST', `/tasks/${task.id}/reschedule`, { runAt: Date.now() - 300 });
    expect(status).toBe(200);
    await doneRun(task.id);
  });

  it('with delayMs: 0 runs now without allowPast', async () => {
    const task = await create();
    expect((await call('POST', `/tasks/${task.id}/reschedule`, { delayMs: 0 })).status).toBe(200);
    const { task: done } = await doneRun(task.id);
    expect(done.latenessMs).toBeLessThan(5_000);
  });

  it('with allowPast: true runs at once, late by the time since the move, not since 1970', async () => {
    const task = await create();
    const before = Date.now();
    const { status, body } = await call('POST', `/tasks/${task.id}/reschedule`, { runAt: '1970-01-01T00:00:01Z', allowPast: true });
    expect(status).toBe(200);
    // It runs at once: its runAt is the move's time, not 1970.
    expect(Date.parse(body.runAt)).toBeGreaterThanOrEqual(before - 1000);
    const { task: done, runLateness } = await doneRun(task.id);
    expect(done.latenessMs).toBeGreaterThanOrEqual(0);
    expect(done.latenessMs).toBeLessThan(5_000);
    expect(runLateness).toBeLessThan(5_000);
    expect(await ran(task.id)).toBe(1);
  });

  it('is refused for a retry to a past time too', async () => {
    const task = await create();
    await db.execute("UPDATE punctual_tasks SET status = 'failed', finished_at = NOW(3) WHERE id = ?", [task.id]);
    const refused = await call('POST', `/tasks/${task.id}/retry`, { runAt: 1_000_000_000_000 });
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe('PUNCTUAL_RUN_AT_PAST');
    expect((await read(task.id)).status).toBe('failed');
    // A retry without a time runs now, as before.
    expect((await call('POST', `/tasks/${task.id}/retry`, {})).status).toBe(200);
    await doneRun(task.id);
  });
});

describe('a bulk move into the past', () => {
  it('to an instant is refused and moves nothing; with allowPast it runs them at once with a sane lateness', async () => {
    const tasks = [await create({ tags: ['past:1'] }), await create({ tags: ['past:1'] })];
    const refused = await call('POST', '/tasks/bulk/reschedule', { tag: 'past:1', runAt: '1970-01-01T00:00:01Z' });
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe('PUNCTUAL_RUN_AT_PAST');
    for (const task of tasks) expect((await read(task.id)).runAt).toBe(task.runAt);

    const moved = await call('POST', '/tasks/bulk/reschedule', { tag: 'past:1', runAt: '1970-01-01T00:00:01Z', allowPast: true });
    expect(moved.status).toBe(200);
    expect(moved.body.changed).toBe(2);
    for (const task of tasks) {
      const { task: done, runLateness } = await doneRun(task.id);
      expect(done.latenessMs).toBeLessThan(5_000);
      expect(runLateness).toBeLessThan(5_000);
    }
  });

  it('by a shift leaves the tasks it would move into the past where they are, unless allowPast', async () => {
    const near = await create({ tags: ['shift:1'], delayMs: 10 * 60_000 });
    const far = await create({ tags: ['shift:1'], delayMs: 3 * HOUR });
    const shift = { tag: 'shift:1', shiftMs: -2 * HOUR };
    const first = await call('POST', '/tasks/bulk/reschedule', { ...shift, requestId: 'earlier-1' });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ matched: 2, changed: 1 });
    expect((await read(near.id)).runAt).toBe(near.runAt);
    expect(Date.parse((await read(far.id)).runAt)).toBe(Date.parse(far.runAt) - 2 * HOUR);

    const second = await call('POST', '/tasks/bulk/reschedule', { ...shift, requestId: 'earlier-2', allowPast: true });
    expect(second.body.changed).toBe(2);
    const { task: done } = await doneRun(near.id);
    expect(done.latenessMs).toBeLessThan(5_000);
  });
});

describe('a create in the past', () => {
  it('is still taken, runs at once, and is late from its create', async () => {
    const { status, body } = await call('POST', '/tasks', { type: 'ledgered', payload: {}, runAt: '1970-01-01T00:00:01Z' });
    expect(status).toBe(201);
    expect(body.runAt).toBe('1970-01-01T00:00:01.000Z');
    const { task: done, runLateness } = await doneRun(body.id);
    expect(done.latenessMs).toBeLessThan(5_000);
    expect(runLateness).toBeLessThan(5_000);
  });
});
