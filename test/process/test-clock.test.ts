/**
 * The test clock through the real server: a shop's CI starts it with --test-clock and moves time
 * with POST /test/clock. Off, the routes are 404; on, it is loud (a header on every answer, a
 * warning at start, /readyz); it refuses a database holding tasks made without it.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, type ServerProcess } from '../helpers/server.js';
import { startFailure } from '../helpers/start-failure.js';
import { createShop } from '../helpers/shop.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const BIN = fileURLToPath(new URL('../../bin/punctual.mjs', import.meta.url));
const MINUTE = 60_000;

describe('the test clock off (a production start)', () => {
  let db: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    db = await createTestDatabase('test_clock_off');
    server = await startServer({ env: { DATABASE_URL: db.url } });
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('GET and POST /test/clock answer 404 naming the way to turn it on, and nothing says test clock', async () => {
    const read = await server.request('GET', '/test/clock');
    expect(read.status).toBe(404);
    expect(read.body.code).toBe('PUNCTUAL_TEST_CLOCK_OFF');
    expect(read.body.message).toMatch(/--test-clock.*TEST_CLOCK=on/);
    const move = await server.request('POST', '/test/clock', { advanceMs: MINUTE });
    expect(move.status).toBe(404);
    const response = await fetch(`${server.baseUrl}/healthz`);
    expect(response.headers.get('punctual-test-clock')).toBeNull();
    const ready = await server.request('GET', '/readyz');
    expect(ready.body.testClock).toBeUndefined();
  });
});

describe('the test clock on', () => {
  let db: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    db = await createTestDatabase('test_clock_on');
    await createShop(db, 3, 10);
    // As a shop's CI starts it: the command with the flag, nothing in the environment but the database.
    server = await startServer({ main: BIN, args: ['start', '--test-clock'], env: { DATABASE_URL: db.url } });
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('is loud: a warning at start, a header on every answer, /readyz names it', async () => {
    expect(server.logs.some((line) => line.level === 40 && /TEST_CLOCK is on/.test(line.msg))).toBe(true);
    for (const path of ['/healthz', '/readyz', '/tasks/pending', '/no-such-route']) {
      const response = await fetch(`${server.baseUrl}${path}`);
      expect(response.headers.get('punctual-test-clock'), path).toBe('on');
    }
    const ready = await server.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.testClock).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    const [mark] = await db.query<any[]>("SELECT value FROM punctual_meta WHERE name = 'test_clock'");
    expect(mark?.value).toBe('on');
  });

  it('close this order in 30 minutes: pending after 29, closed after 30, in under a second of wall time', async () => {
    await db.execute("INSERT INTO orders (order_sn, status, items) VALUES ('SN30', 'unpaid', '[{\"goods_id\": 1, \"num\": 2}]')");
    const started = performance.now();
    const created = await server.request('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'SN30' }, delayMs: 30 * MINUTE });
    expect(created.status).toBe(201);
    const at29 = await server.request('POST', '/test/clock', { advanceMs: 29 * MINUTE });
    expect(at29.status).toBe(200);
    expect(at29.body.settled).toBe(true);
    expect((await server.request('GET', `/tasks/${created.body.id}`)).body.status).toBe('pending');
    const at30 = await server.request('POST', '/test/clock', { advanceMs: MINUTE });
    expect(at30.body.settled).toBe(true);
    const task = (await server.request('GET', `/tasks/${created.body.id}`)).body;
    const wallMs = performance.now() - started;
    expect(task.status).toBe('done');
    const [order] = await db.query<any[]>("SELECT status FROM orders WHERE order_sn = 'SN30'");
    expect(order.status).toBe('closed');
    const [goods] = await db.query<any[]>('SELECT stock FROM goods WHERE id = 1');
    expect(goods.stock).toBe(12);
    console.log(`the 30-minute close_order flow took ${wallMs.toFixed(0)} ms of wall time`);
    expect(wallMs).toBeLessThan(1000);
  });

  it('GET /test/clock reads it; POST moves it to an instant; bad input is a 400 that moves nothing', async () => {
    const before = (await server.request('GET', '/test/clock')).body;
    expect(before.testClock).toBe(true);
    expect(Date.parse(before.now)).toBe(before.nowMs);
    for (const body of [
      {},
      { advanceMs: 1, to: before.nowMs + 5 },
      { advanceMs: -1 },
      { advanceMs: 1.5 },
      { to: before.nowMs - 1 },
      { to: 'tomorrow' },
      { to: '2030-01-01 10:00:00', timezone: 'Mars/Olympus' },
      { advanceMs: 1, timezone: 'UTC' },
      { advanceMs: 1, extra: true },
    ]) {
      const answer = await server.request('POST', '/test/clock', body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.message, JSON.stringify(body)).toMatch(/body/);
    }
    expect((await server.request('GET', '/test/clock')).body.nowMs).toBe(before.nowMs);
    const to = before.nowMs + 3 * 24 * 3600 * 1000;
    const moved = await server.request('POST', '/test/clock', { to: new Date(to).toISOString() });
    expect(moved.status).toBe(200);
    expect(moved.body.nowMs).toBe(to);
    // A task made now is due by the moved clock, not the wall clock.
    const created = await server.request('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'SN-later' }, delayMs: MINUTE });
    expect(created.status).toBe(201);
    expect(Date.parse(created.body.runAt)).toBe(to + MINUTE);
  });
});

describe('a start on the test clock refuses a database with tasks made without it', () => {
  let db: TestDatabase;
  afterAll(async () => db?.drop());

  it('one line naming TEST_CLOCK and the database, exit 1, nothing marked', async () => {
    db = await createTestDatabase('test_clock_prod');
    await db.execute(
      'INSERT INTO punctual_tasks (type, payload, run_at) VALUES (\'close_order\', \'{"orderSn": "SN1"}\', UTC_TIMESTAMP(3))',
    );
    const failure = await startFailure({ DATABASE_URL: db.url, TEST_CLOCK: 'on' });
    expect(failure.line).toMatch(
      new RegExp(`^punctual: cannot start: TEST_CLOCK=on: the database ${db.name} holds 1 task\\(s\\) made without the test clock`),
    );
    expect(await db.query<any[]>('SELECT * FROM punctual_meta')).toHaveLength(0);
  });

  it('a real-clock start takes the mark away: the next test-clock start refuses the database', async () => {
    const marked = await createTestDatabase('test_clock_unmark');
    try {
      const test = await startServer({ env: { DATABASE_URL: marked.url, TEST_CLOCK: 'on' } });
      await test.stop();
      const real = await startServer({ env: { DATABASE_URL: marked.url } });
      expect(real.logs.some((line) => line.level === 40 && /used with the test clock/.test(line.msg))).toBe(true);
      expect((await real.request('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'SN2' }, delayMs: MINUTE })).status).toBe(
        201,
      );
      await real.stop();
      const failure = await startFailure({ DATABASE_URL: marked.url, TEST_CLOCK: 'on' });
      expect(failure.line).toMatch(/TEST_CLOCK=on: the database .* holds 1 task/);
    } finally {
      await marked.drop();
    }
  });
});
