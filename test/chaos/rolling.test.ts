/** A rolling restart: a second process starts, then the first is stopped while tasks fire. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { createTasks, startServer, waitFor } from '../helpers/server.js';
import { checkShop, countStatus, createShopDatabase, makeOrders } from '../helpers/shop.js';
import { pick, report } from './scale.js';

const N = pick(2000, 6000);
const SPREAD_MS = pick(6000, 15_000);
const orders = makeOrders(N, 20, 'RR');
let db: TestDatabase;

beforeAll(async () => {
  db = await createShopDatabase('rolling', orders);
});

afterAll(async () => {
  await db?.drop();
});

describe('rolling restart', () => {
  it('hands over without running a task twice or dropping one; the old process exits 0 in time', { timeout: 120_000 }, async () => {
    const env = { DATABASE_URL: db.url, REFILL_INTERVAL_MS: '200', STOP_TIMEOUT_MS: '10000' };
    const old = await startServer({ env });
    const first = Date.now() + 3000;
    const ids = await createTasks(
      old,
      orders.map((order, i) => ({
        type: 'close_order',
        payload: { orderSn: order.orderSn },
        runAt: first + Math.floor((i * SPREAD_MS) / N),
      })),
      32,
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, first + SPREAD_MS / 4 - Date.now())));
    const replacement = await startServer({ env });
    const doneAtHandover = await countStatus(db, 'done', ids);
    const stopAsked = Date.now();
    const code = await old.stop('SIGTERM');
    const stopMs = Date.now() - stopAsked;
    try {
      await waitFor(async () => (await countStatus(db, 'done', ids)) === N, 30_000, 'every task to run');
    } finally {
      expect(await replacement.stop()).toBe(0);
    }
    // Who ran what, for the report only: the ledger below is what the test counts on.
    const ran = (logs: typeof old.logs) => logs.filter((line) => line.msg === 'task done').length;
    const check = await checkShop(db, orders);
    report('rolling restart', {
      tasks: N,
      'done at hand-over': doneAtHandover,
      'old exit code': code,
      'old stopped in ms': stopMs,
      'run by old': ran(old.logs),
      'run by new': ran(replacement.logs),
      'ran twice': check.ranTwice,
      runs: check.runs,
    });
    expect(code).toBe(0);
    expect(stopMs).toBeLessThan(10_000);
    expect(doneAtHandover).toBeGreaterThan(0);
    expect(doneAtHandover).toBeLessThan(N);
    expect(check).toMatchObject({ closed: N, runs: N, ranTwice: 0, stockMatches: true });
  });
});
