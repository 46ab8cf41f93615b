import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { createTasks, startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, countStatus, createShopDatabase, makeOrders } from '../helpers/shop.js';

let db: TestDatabase;
const orders = makeOrders(2000);
/** The tasks' times spread over this long after the first one. */
const SPREAD_MS = 9000;

beforeAll(async () => {
  db = await createShopDatabase('crash', orders);
});

afterAll(async () => {
  await db?.drop();
});

describe('kill -9', () => {
  it('loses nothing and closes no order twice when the process dies while tasks fire', async () => {
    const env = { DATABASE_URL: db.url, CONCURRENCY: '4', BATCH_SIZE: '25' };
    let server: ServerProcess = await startServer({ env });
    // Far enough ahead that every task exists before the first one is due, on a busy machine too
    // (2,000 creates take about 1 s on a quiet one, and were seen to take over 8 s on a loaded one).
    const due = Date.now() + 15_000;
    const ids = await createTasks(
      server,
      orders.map((order, i) => ({
        type: 'close_order',
        payload: { orderSn: order.orderSn },
        runAt: due + Math.floor((i * SPREAD_MS) / orders.length),
      })),
      32,
    );
    expect(Date.now()).toBeLessThan(due);
    const done = () => countStatus(db, 'done', ids);
    const kills: number[] = [];
    // Kill it three times while tasks are firing, restarting it each time. A restart was seen to
    // take over 2 s on a loaded machine: the kills are 3 s apart, and the last one 2.5 s before
    // the last task is due, or it lands after every task has run.
    for (const at of [due + 700, due + 3700, due + 6500]) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
      kills.push(await done());
      expect(await server.stop('SIGKILL')).toBeNull();
      server = await startServer({ env });
    }
    try {
      await waitFor(async () => (await done()) === ids.length, 20_000, 'every task to run');
      // Each kill happened mid-run: some done before it, some after.
      expect(kills[0]).toBeGreaterThan(0);
      expect(kills[2]).toBeLessThan(ids.length);
      const check = await checkShop(db, orders);
      expect(check).toMatchObject({ closed: orders.length, runs: orders.length, ranTwice: 0, stockMatches: true });
      const [attempts] = await db.query<any[]>('SELECT MAX(attempts) AS most, MIN(attempts) AS least FROM punctual_tasks WHERE id IN (?)', [ids]);
      expect([Number(attempts.least), Number(attempts.most)]).toEqual([1, 1]);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});
