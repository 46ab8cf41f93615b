import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'bulk-admin-token-0123456789';
const WRITE = 'bulk-write-token-0123456789';
const as = (token: string) => ({ authorization: `Bearer ${token}` });

let db: TestDatabase;
let service: TestService;

const call = (method: string, url: string, body?: unknown, token = ADMIN) => service.call(method, url, body, as(token));

async function count(sql: string, values?: unknown[]): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

async function batch(tasks: unknown[]): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < tasks.length; i += 1000) {
    const { status, body } = await call('POST', '/tasks/batch', { tasks: tasks.slice(i, i + 1000) }, WRITE);
    expect(status).toBe(200);
    expect(body.refused).toBe(0);
    ids.push(...body.results.map((r: { id: number }) => r.id));
  }
  return ids;
}

const ledgered = (i: number, extra: Record<string, unknown> = {}) => ({ type: 'ledgered', payload: { i }, ...extra });

beforeAll(async () => {
  db = await createTestDatabase('bulk');
  // The effects ledger: one row per run, so a task run twice shows as two rows.
  await db.execute('CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT NOT NULL)');
  service = await startTestService(
    db,
    { API_TOKEN: ADMIN, API_TOKENS_WRITE: WRITE, CONCURRENCY: '8', HORIZON_MS: String(3_600_000) },
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

describe('bulk cancel', () => {
  it('racing firing timers, every task ends done exactly once or cancelled', async () => {
    const N = 1500;
    // Due over ~7.5 s from a second from now: timers fire while the cancel walks its chunks.
    const start = Date.now() + 1_000;
    const ids = await batch(Array.from({ length: N }, (_, i) => ledgered(i, { runAt: start + 5 * i, tags: ['sale:88'] })));
    const other = await batch([ledgered(-1, { delayMs: 3_000_000, tags: ['sale:99'] })]);
    await waitFor(async () => (await count('SELECT COUNT(*) AS n FROM ledger')) > 0, 10_000);
    const { status, body } = await call('POST', '/tasks/bulk/cancel', { tag: 'sale:88' });
    expect(status).toBe(200);
    await waitFor(
      async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status IN ('pending', 'running')")) === 1,
      20_000,
    );
    const done = await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'");
    const cancelled = await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'");
    expect(done + cancelled).toBe(N);
    expect(body.changed).toBe(cancelled);
    expect(body.matched).toBeGreaterThanOrEqual(body.changed);
    expect(cancelled).toBeGreaterThan(0);
    expect(done).toBeGreaterThan(0);
    // Each done task ran exactly once; no cancelled task ran.
    expect(await count('SELECT COUNT(*) AS n FROM ledger')).toBe(done);
    expect(await count('SELECT COUNT(DISTINCT task_id) AS n FROM ledger')).toBe(done);
    expect(await count("SELECT COUNT(*) AS n FROM ledger l JOIN punctual_tasks t ON t.id = l.task_id WHERE t.status = 'cancelled'")).toBe(
      0,
    );
    expect(ids.length).toBe(N);
    expect((await call('GET', `/tasks/${other[0]}`)).body.status).toBe('pending');
    // The same request again changes nothing.
    expect((await call('POST', '/tasks/bulk/cancel', { tag: 'sale:88' })).body).toEqual({ matched: 0, changed: 0 });
  });

  it('by key prefix and by type; wildcards in a prefix are literal', async () => {
    await batch([
      ledgered(1, { key: 'm42:a', delayMs: 3_000_000 }),
      ledgered(2, { key: 'm42:b', delayMs: 3_000_000 }),
      ledgered(3, { key: 'm4_:c', delayMs: 3_000_000 }),
      ledgered(4, { key: 'm43:d', delayMs: 3_000_000 }),
      { type: 'close_order', payload: { orderSn: 'X' }, delayMs: 3_000_000 },
    ]);
    expect((await call('POST', '/tasks/bulk/cancel', { keyPrefix: 'm4_' })).body).toEqual({ matched: 1, changed: 1 });
    expect((await call('POST', '/tasks/bulk/cancel', { keyPrefix: 'm42:' })).body).toEqual({ matched: 2, changed: 2 });
    expect((await call('POST', '/tasks/bulk/cancel', { type: 'ledgered' })).body).toEqual({ matched: 1, changed: 1 });
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending'")).toBe(1);
    expect((await call('POST', '/tasks/bulk/cancel', { type: 'ledgered', tag: 'x' })).status).toBe(400);
  });

  it('is refused (403) with a write token and changes nothing', async () => {
    await batch([ledgered(1, { delayMs: 3_000_000, tags: ['t:1'] })]);
    const answer = await call('POST', '/tasks/bulk/cancel', { tag: 't:1' }, WRITE);
    expect(answer.status).toBe(403);
    expect((await call('POST', '/tasks/bulk/reschedule', { tag: 't:1', shiftMs: 1, requestId: 'r1' }, WRITE)).status).toBe(403);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending'")).toBe(1);
  });
});

describe('bulk reschedule', () => {
  it('shifts by a duration once per requestId, and re-arms the timers', async () => {
    const HOUR = 3_600_000;
    const ids = await batch(Array.from({ length: 1200 }, (_, i) => ledgered(i, { delayMs: HOUR + i, tags: ['merchant:42'] })));
    const before = new Map((await db.query<any[]>('SELECT id, run_at FROM punctual_tasks')).map((r) => [Number(r.id), r.run_at.getTime()]));
    const postpone = { tag: 'merchant:42', shiftMs: HOUR, requestId: 'postpone-42' };
    expect((await call('POST', '/tasks/bulk/reschedule', postpone)).body).toEqual({ matched: 1200, changed: 1200 });
    // A repeat moves nothing.
    expect((await call('POST', '/tasks/bulk/reschedule', postpone)).body).toEqual({ matched: 1200, changed: 0 });
    const after = await db.query<any[]>('SELECT id, run_at FROM punctual_tasks');
    for (const row of after) expect(row.run_at.getTime()).toBe(before.get(Number(row.id))! + HOUR);
    expect(await count('SELECT COUNT(*) AS n FROM ledger')).toBe(0);
    // Pulled in to overdue (which the request must say it means): the re-armed timers run them, each once.
    const pullIn = { tag: 'merchant:42', shiftMs: -2 * HOUR - 5_000, requestId: 'pull-in-42', allowPast: true };
    expect((await call('POST', '/tasks/bulk/reschedule', pullIn)).body).toEqual({ matched: 1200, changed: 1200 });
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'")) === ids.length, 30_000);
    expect(await count('SELECT COUNT(*) AS n FROM ledger')).toBe(ids.length);
    // Each run stored how late it started, counted from the move that made it overdue (not the 5 s
    // before it that it was pulled in by).
    const late = await db.query<any[]>('SELECT MIN(lateness_ms) AS low, MAX(lateness_ms) AS high FROM punctual_tasks');
    expect(Number(late[0].low)).toBeGreaterThanOrEqual(0);
    expect(Number(late[0].high)).toBeLessThan(60_000);
    const shown = (await call('GET', `/tasks/${ids[0]}`)).body;
    expect(shown.latenessMs).toBeGreaterThanOrEqual(0);
    await new Promise((resolve) => setTimeout(resolve, 0));
    const summary = (await call('GET', '/tasks/summary')).body;
    expect(summary.latenessP50Ms === null || summary.latenessP50Ms < 60_000).toBe(true);
  });

  it('sets an instant (read in a zone); a repeat changes nothing', async () => {
    const armedBefore = service.scheduler.armed;
    const ids = await batch([ledgered(1, { key: 'flash:88:a', delayMs: 60_000 }), ledgered(2, { key: 'flash:88:b', delayMs: 120_000 })]);
    expect(service.scheduler.armed).toBe(armedBefore + 2);
    const set = { keyPrefix: 'flash:88:', runAt: '2030-12-01 12:00:00', timezone: 'Asia/Shanghai' };
    expect((await call('POST', '/tasks/bulk/reschedule', set)).body).toEqual({ matched: 2, changed: 2 });
    expect((await call('POST', '/tasks/bulk/reschedule', set)).body).toEqual({ matched: 2, changed: 0 });
    const task = (await call('GET', `/tasks/${ids[1]}`)).body;
    expect(task).toMatchObject({ runAt: '2030-12-01T04:00:00.000Z', timezone: 'Asia/Shanghai' });
    // Moved out of the horizon: their timers were disarmed.
    expect(service.scheduler.armed).toBe(armedBefore);
    expect((await call('POST', '/tasks/bulk/reschedule', { keyPrefix: 'flash:88:', shiftMs: 1 })).status).toBe(400);
  });
});

describe('bulk changes by type', () => {
  // A type's tasks are walked in run_at order (the index by type has no other), which a move
  // changes: each pass must meet every task once, or `matched` counts a task twice.
  it('meet each task once however far a move takes it past the others', async () => {
    const HOUR = 3_600_000;
    const N = 1200; // three chunks
    await batch(Array.from({ length: N }, (_, i) => ledgered(i, { delayMs: HOUR + i * 1000 })));
    const before = new Map((await db.query<any[]>('SELECT id, run_at FROM punctual_tasks')).map((r) => [Number(r.id), r.run_at.getTime()]));
    const runAts = async () =>
      new Map((await db.query<any[]>('SELECT id, run_at FROM punctual_tasks')).map((r) => [Number(r.id), r.run_at.getTime()]));
    // Later by 10 min: each task lands past 600 others.
    const later = { type: 'ledgered', shiftMs: 600_000, requestId: 'later-10' };
    expect((await call('POST', '/tasks/bulk/reschedule', later)).body).toEqual({ matched: N, changed: N });
    for (const [id, runAt] of await runAts()) expect(runAt).toBe(before.get(id)! + 600_000);
    // Earlier by 20 min.
    const earlier = { type: 'ledgered', shiftMs: -1_200_000, requestId: 'earlier-20' };
    expect((await call('POST', '/tasks/bulk/reschedule', earlier)).body).toEqual({ matched: N, changed: N });
    for (const [id, runAt] of await runAts()) expect(runAt).toBe(before.get(id)! - 600_000);
    // All to one instant amid them, then again: the second finds them all there and moves none.
    const middle = new Date([...before.values()].sort((a, b) => a - b)[N / 2]! - 600_000 + 500).toISOString();
    const set = { type: 'ledgered', runAt: middle, timezone: 'UTC' };
    expect((await call('POST', '/tasks/bulk/reschedule', set)).body).toEqual({ matched: N, changed: N });
    expect((await call('POST', '/tasks/bulk/reschedule', set)).body).toEqual({ matched: N, changed: 0 });
    expect(new Set((await runAts()).values())).toEqual(new Set([Date.parse(middle)]));
    expect((await call('POST', '/tasks/bulk/cancel', { type: 'ledgered' })).body).toEqual({ matched: N, changed: N });
    expect(await count('SELECT COUNT(*) AS n FROM ledger')).toBe(0);
  });
});

describe('GET /tasks/pending filters', () => {
  it('by tag and by key prefix', async () => {
    await batch([
      ledgered(1, { key: 'p:1', delayMs: 3_000_000, tags: ['merchant:1'] }),
      ledgered(2, { key: 'p:2', delayMs: 3_000_001, tags: ['merchant:2'] }),
      ledgered(3, { key: 'q:3', delayMs: 3_000_002, tags: ['merchant:1', 'sale:1'] }),
    ]);
    const keys = async (query: string) =>
      (await call('GET', `/tasks/pending?${query}`)).body.tasks.map((task: { key: string }) => task.key);
    expect(await keys('tag=merchant:1')).toEqual(['p:1', 'q:3']);
    expect(await keys('keyPrefix=p:')).toEqual(['p:1', 'p:2']);
    expect(await keys('keyPrefix=p:&tag=merchant:1')).toEqual(['p:1']);
    expect((await call('GET', '/tasks/pending?tag=has%20space')).status).toBe(400);
  });
});

describe('stored lateness', () => {
  it('runs a task weeks overdue and stores how late it was, without holding up the batch it came in', async () => {
    const DAY = 86_400_000;
    // 40 days is more than a signed 32-bit count of ms: the run must not fail on storing it. The
    // task was made before it fell due (lateness counts from the later of the two).
    const old = await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, misfire, created_at) VALUES ('ledgered', '{}', UTC_TIMESTAMP(3) - INTERVAL 40 DAY, 'run', UTC_TIMESTAMP(3) - INTERVAL 41 DAY)",
    );
    const now = await db.execute("INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('ledgered', '{}', UTC_TIMESTAMP(3))");
    const ids = [old.insertId, now.insertId];
    await waitFor(
      async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND id IN (?)", [ids])) === 2,
      20_000,
    );
    const shown = (await call('GET', `/tasks/${old.insertId}`)).body;
    expect(shown.latenessMs).toBeGreaterThanOrEqual(40 * DAY);
    expect(shown.latenessMs).toBeLessThan(41 * DAY);
    expect(await count('SELECT COUNT(*) AS n FROM ledger')).toBe(2);
  });
});
