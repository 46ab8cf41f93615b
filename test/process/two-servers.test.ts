import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { createTasks, startServer, waitFor } from '../helpers/server.js';
import { checkShop, countStatus, createShopDatabase, makeOrders } from '../helpers/shop.js';

let db: TestDatabase;
const orders = makeOrders(2000);

beforeAll(async () => {
  db = await createShopDatabase('two_servers', orders);
});

afterAll(async () => {
  await db?.drop();
});

describe('two server processes on one database', () => {
  it('never run one task twice', async () => {
    const env = { DATABASE_URL: db.url, REFILL_INTERVAL_MS: '200' };
    const [a, b] = await Promise.all([startServer({ env }), startServer({ env })]);
    try {
      const due = Date.now() + 2500;
      const bodies = orders.map((order, i) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: due + (i % 1000) * 2 }));
      const ids = [...(await createTasks(a, bodies.slice(0, 1000))), ...(await createTasks(b, bodies.slice(1000)))];
      await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 20_000, 'every task to run');
      // Each process's own count of runs, from its metrics: both took part, and together they ran
      // each task once, as the ledger (one row per committed run) says too.
      const ran = async (server: typeof a) =>
        parsePrometheus(await (await fetch(`${server.baseUrl}/metrics`)).text()).get(
          'punctual_task_runs_total{type="close_order",outcome="done"}',
        ) ?? 0;
      const [byA, byB] = [await ran(a), await ran(b)];
      expect(byA + byB).toBe(ids.length);
      expect(byA).toBeGreaterThan(0);
      expect(byB).toBeGreaterThan(0);
      const check = await checkShop(db, orders);
      expect(check).toMatchObject({ closed: orders.length, runs: ids.length, ranTwice: 0, stockMatches: true });
    } finally {
      expect(await Promise.all([a.stop(), b.stop()])).toEqual([0, 0]);
    }
  });
});
