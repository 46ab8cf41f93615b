/**
 * The routes the console's actions and figures need that a shop may call too: replace a pending
 * task's payload (PUT /tasks/:id/payload), delete a task (DELETE /tasks/:id) or every finished
 * task a selector picks (POST /tasks/bulk/delete), and the last hour's runs counted from the run
 * history (GET /runs/last-hour), which a restart does not change. Each change is audited and
 * refused for a read token with a clear 403.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'actions-admin-token-0123456789';
const WRITE = 'actions-write-token-0123456789';
const READ = 'actions-read-token-0123456789';
const as = (token: string) => ({ authorization: `Bearer ${token}` });
const HOUR = 3_600_000;
const WORKER = 'actions-worker-token-0123456789';
const ENV = {
  API_TOKENS: `ops-alice:admin:${ADMIN},desk:write:${WRITE},wallboard:read:${READ},picker:worker:${WORKER}`,
  WORKER_TYPES: 'pick_parcel',
};

let db: TestDatabase;
let service: TestService;

const handlers = () => [
  testHandler('flaky', async () => {
    throw new Error('partner answered 503');
  }),
  testHandler('quiet', async () => {}),
  testHandler('answers', async ({ task }) => String((task.payload as { answer: string }).answer)),
];
const call = (method: string, url: string, body?: unknown, token = ADMIN) => service.call(method, url, body, as(token));

async function count(sql: string, values?: unknown[]): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

async function create(task: Record<string, unknown>): Promise<number> {
  const { status, body } = await call('POST', '/tasks', task, WRITE);
  expect(status).toBe(201);
  return body.id as number;
}

async function failedTask(): Promise<number> {
  const id = await create({ type: 'flaky', payload: {}, delayMs: 0, maxAttempts: 1 });
  await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'failed'", [id])) === 1);
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase('console_actions');
  service = await startTestService(db, ENV, { handlers: handlers() });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
  await db.execute('DELETE FROM punctual_task_runs');
  await db.execute('DELETE FROM punctual_audit_log');
});

describe('PUT /tasks/:id/payload', () => {
  it("replaces a pending task's payload, checked as a create's, audited; refused for a read token and once it is not pending", async () => {
    const id = await create({ type: 'quiet', payload: { orderSn: 'SN1' }, delayMs: HOUR, key: 'close:SN1' });
    const edited = await call('PUT', `/tasks/${id}/payload`, { payload: { orderSn: 'SN2' } }, WRITE);
    expect(edited.status).toBe(200);
    expect(edited.body.payload).toEqual({ orderSn: 'SN2' });
    expect(edited.body.key).toBe('close:SN1');
    expect((await call('GET', `/tasks/${id}`)).body.payload).toEqual({ orderSn: 'SN2' });

    const bad = await call('PUT', `/tasks/${id}/payload`, { payload: 'not an object' }, WRITE);
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('body/payload');

    const reader = await call('PUT', `/tasks/${id}/payload`, { payload: { orderSn: 'SN3' } }, READ);
    expect(reader.status).toBe(403);
    expect(reader.body.message).toMatch(/write/);

    await call('POST', `/tasks/${id}/cancel`, undefined, WRITE);
    const late = await call('PUT', `/tasks/${id}/payload`, { payload: { orderSn: 'SN3' } }, WRITE);
    expect(late.status).toBe(409);
    expect(late.body.message).toBe(`task ${id} is cancelled; only a pending task's payload can be changed`);
    expect((await call('GET', `/tasks/${id}`)).body.payload).toEqual({ orderSn: 'SN2' });

    const trail = await call('GET', `/audit?target=task:${id}&action=edit-payload`);
    expect(trail.body.entries.map((e: { actor: string; status: number }) => [e.actor, e.status])).toEqual([
      ['desk', 409],
      ['desk', 200],
    ]);
  });
});

describe('DELETE /tasks/:id', () => {
  it('deletes a task with its runs, a pending one disarmed; audited; refused for a read token', async () => {
    const failed = await failedTask();
    expect(await count('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE task_id = ?', [failed])).toBe(1);
    const reader = await call('DELETE', `/tasks/${failed}`, undefined, READ);
    expect(reader.status).toBe(403);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ?', [failed])).toBe(1);

    const gone = await call('DELETE', `/tasks/${failed}`, undefined, WRITE);
    expect(gone.status).toBe(200);
    expect(gone.body).toMatchObject({ id: failed, status: 'failed' });
    expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ?', [failed])).toBe(0);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE task_id = ?', [failed])).toBe(0);
    expect((await call('DELETE', `/tasks/${failed}`, undefined, WRITE)).status).toBe(404);

    // A pending task due in 300 ms, deleted: it never runs (its timer went with it).
    const soon = await create({ type: 'quiet', payload: {}, delayMs: 300 });
    expect((await call('DELETE', `/tasks/${soon}`, undefined, WRITE)).status).toBe(200);
    const canary = await create({ type: 'quiet', payload: {}, delayMs: 400 });
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [canary])) === 1);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE task_id = ?', [soon])).toBe(0);

    const trail = await call('GET', `/audit?action=delete`);
    expect(trail.body.entries.map((e: { target: string }) => e.target).sort()).toEqual([`task:${failed}`, `task:${soon}`].sort());
  });
});

describe('POST /tasks/bulk/delete', () => {
  it('deletes every failed task of a type and no other, audited; refused below admin', async () => {
    const failed = [await failedTask(), await failedTask()];
    const pending = await create({ type: 'flaky', payload: {}, delayMs: HOUR });
    const writer = await call('POST', '/tasks/bulk/delete', { status: 'failed', type: 'flaky' }, WRITE);
    expect(writer.status).toBe(403);
    expect(writer.body.message).toMatch(/admin/);
    expect((await call('POST', '/tasks/bulk/delete', { type: 'flaky' })).status).toBe(400);

    const done = await call('POST', '/tasks/bulk/delete', { status: 'failed', type: 'flaky' });
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ matched: 2, changed: 2 });
    expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?)', [failed])).toBe(0);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE task_id IN (?)', [failed])).toBe(0);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'pending'", [pending])).toBe(1);
    const trail = await call('GET', '/audit?action=bulk-delete');
    expect(trail.body.entries[0]).toMatchObject({ actor: 'ops-alice', target: 'type:flaky', status: 200 });
  });
});

describe('GET /tasks and /tasks/counts by group and time range', () => {
  it('filter by group and by when the tasks are due; a naive instant is a 400', async () => {
    const base = Date.parse('2030-01-01T00:00:00Z');
    const ids: number[] = [];
    for (let i = 0; i < 4; i++)
      ids.push(await create({ type: 'quiet', payload: { i }, runAt: base + i * HOUR, group: i < 2 ? 'merchant:1' : 'merchant:2' }));
    const page = await call('GET', '/tasks?status=pending&group=merchant:2', undefined, READ);
    expect(page.body.tasks.map((t: { id: number }) => t.id)).toEqual(ids.slice(2));
    expect(page.body.total).toBe(2);
    const window = await call(
      'GET',
      `/tasks?status=pending&dueFrom=2030-01-01T01:00:00Z&dueUntil=${encodeURIComponent('2030-01-01T11:00:00+08:00')}`,
      undefined,
      READ,
    );
    expect(window.body.tasks.map((t: { id: number }) => t.id)).toEqual(ids.slice(1, 3));
    const counted = await call('GET', '/tasks/counts?group=merchant:1&dueFrom=2030-01-01T01:00:00Z', undefined, READ);
    expect(counted.body.counts.pending).toBe(1);
    const naive = await call('GET', '/tasks?dueFrom=2030-01-01 01:00:00', undefined, READ);
    expect(naive.status).toBe(400);
    expect(naive.body.message).toContain('querystring/dueFrom');
  });
});

describe('GET /tasks by series', () => {
  it("lists a recurring series' first task and its occurrences, and no other task", async () => {
    const first = await create({ type: 'quiet', payload: {}, cron: '0 0 * * *' });
    await create({ type: 'quiet', payload: {}, cron: '0 0 * * *' });
    // An earlier occurrence, done: as the series writes them, a row with the first task's id as series_id.
    await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, status, cron, series_id, finished_at) VALUES ('quiet', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 DAY, 'done', '0 0 * * *', ?, UTC_TIMESTAMP(3))",
      [first],
    );
    const counts = await call('GET', `/tasks/counts?series=${first}`, undefined, READ);
    expect(counts.body.counts).toMatchObject({ pending: 1, done: 1 });
    const done = await call('GET', `/tasks?status=done&series=${first}`, undefined, READ);
    expect(done.body.tasks.map((t: { seriesId: number }) => t.seriesId)).toEqual([first]);
  });
});

describe('GET /workers', () => {
  it('lists the worker types with their leased and pending tasks', async () => {
    for (let i = 0; i < 3; i++) await create({ type: 'pick_parcel', payload: { i }, delayMs: 0 });
    const leased = await call('POST', '/workers/lease', { types: ['pick_parcel'], max: 2 }, WORKER);
    expect(leased.body.tasks).toHaveLength(2);
    await waitFor(async () => {
      const { body } = await call('GET', '/workers', undefined, READ);
      return body.types[0]?.leased === 2 && body.types[0]?.pending === 1;
    });
    const { status, body } = await call('GET', '/workers', undefined, READ);
    expect(status).toBe(200);
    expect(body).toEqual({ waitingHere: 0, types: [{ type: 'pick_parcel', leased: 2, pending: 1, failed: 0 }] });
  });
});

describe("a handler's result", () => {
  it('is kept on the task and on its run, without control characters and cut to 200 characters', async () => {
    const closed = await create({ type: 'answers', payload: { answer: 'closed' }, delayMs: 0 });
    const noisy = await create({
      type: 'answers',
      payload: { answer: `no such order\r\nfake: line\u0007 ${'x'.repeat(300)}` },
      delayMs: 0,
    });
    const silent = await create({ type: 'quiet', payload: {}, delayMs: 0 });
    const failedId = await failedTask();
    await waitFor(
      async () =>
        (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [[closed, noisy, silent]])) === 3,
    );

    const task = (await call('GET', `/tasks/${closed}`, undefined, READ)).body;
    expect(task.lastResult).toBe('closed');
    const runs = (await call('GET', `/tasks/${closed}/runs`, undefined, READ)).body.runs;
    expect(runs.map((run: { outcome: string; result: string }) => [run.outcome, run.result])).toEqual([['done', 'closed']]);

    const cleaned = (await call('GET', `/tasks/${noisy}`, undefined, READ)).body.lastResult as string;
    expect(cleaned).toMatch(/^no such order fake: line +x+…$/);
    expect(cleaned).toHaveLength(200);
    expect((await call('GET', `/tasks/${noisy}/runs`, undefined, READ)).body.runs[0].result).toBe(cleaned);

    expect((await call('GET', `/tasks/${silent}`, undefined, READ)).body.lastResult).toBeNull();
    expect((await call('GET', `/tasks/${failedId}/runs`, undefined, READ)).body.runs[0].result).toBeNull();
  });
});

describe('GET /runs/last-hour', () => {
  it("counts the whole fleet's runs of the last hour from the run history, the same after a restart", async () => {
    const failed = await failedTask();
    const done = await create({ type: 'quiet', payload: {}, delayMs: 0 });
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [done])) === 1);
    // A run of another process, and one from before the hour: in the table, not in this process's memory.
    await db.execute(
      `INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, process)
       VALUES (?, 1, 'retry', NOW(3) - INTERVAL 2 MINUTE, NOW(3) - INTERVAL 2 MINUTE, NOW(3) - INTERVAL 2 MINUTE, 5, 1, 'elsewhere:1:a'),
              (?, 1, 'done', NOW(3) - INTERVAL 2 HOUR, NOW(3) - INTERVAL 2 HOUR, NOW(3) - INTERVAL 2 HOUR, 5, 1, 'elsewhere:1:a')`,
      [failed, failed],
    );
    // Successful runs of another process, on record in their tasks' rows: one in the hour, one before it.
    await db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, finished_at, lateness_ms, waited_ms, done_by)
       VALUES ('quiet', '{}', NOW(3) - INTERVAL 3 MINUTE, 'done', 1, NOW(3) - INTERVAL 3 MINUTE, 7, 250, 'elsewhere:1:a'),
              ('quiet', '{}', NOW(3) - INTERVAL 3 HOUR, 'done', 1, NOW(3) - INTERVAL 3 HOUR, 7, 0, 'elsewhere:1:a')`,
    );
    const first = await call('GET', '/runs/last-hour', undefined, READ);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ runs: 4, done: 2, retries: 1, failed: 1, lost: 0, waited: 1 });
    expect(first.body.latenessP99Ms).toBeGreaterThanOrEqual(first.body.latenessP50Ms);

    await service.stop();
    service = await startTestService(db, ENV, { handlers: handlers() });
    const after = await call('GET', '/runs/last-hour', undefined, READ);
    expect(after.body).toMatchObject({ runs: 4, done: 2, retries: 1, failed: 1, lost: 0, waited: 1 });
  });
});
