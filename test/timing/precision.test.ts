/**
 * Firing precision, measured on a quiet machine: this file runs alone, after every other test.
 * Lateness is read from the database (orders.closed_at − tasks.run_at), the way a shop sees it.
 */
import { Temporal } from 'temporal-polyfill';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { createTasks, startServer, waitFor } from '../helpers/server.js';
import { closeLateness, createShopDatabase, makeOrders } from '../helpers/shop.js';

let db: TestDatabase;
const orders = makeOrders(40);

beforeAll(async () => {
  db = await createShopDatabase('precision', orders);
});

afterAll(async () => {
  await db?.drop();
});

async function lateness(ids: number[]): Promise<number[]> {
  return (await closeLateness(db, ids)).map((row) => row.late);
}

describe('precision', () => {
  it('runs tasks due in 200 ms within a few ms of their time, never early', async () => {
    const server = await startServer({ env: { DATABASE_URL: db.url } });
    try {
      // One task first, not counted: the first firing of a fresh process pays for its warm-up
      // (10–23 ms on this machine), which is the start's cost, not the timers' precision.
      const [first] = await createTasks(server, [{ type: 'close_order', payload: { orderSn: orders[39]!.orderSn }, delayMs: 50 }]);
      await waitFor(async () => !Number.isNaN((await lateness([first!]))[0]!), 5000, 'the warm-up task to run');
      const ids: number[] = [];
      // One at a time, each due 200 ms after it was created.
      for (const order of orders.slice(0, 20)) {
        const [id] = await createTasks(server, [{ type: 'close_order', payload: { orderSn: order.orderSn }, delayMs: 200 }]);
        ids.push(id!);
        await new Promise((resolve) => setTimeout(resolve, 60));
      }
      await waitFor(async () => (await lateness(ids)).every((late) => !Number.isNaN(late)), 5000, 'the tasks to run');
      const late = (await lateness(ids)).sort((a, b) => a - b);
      console.log(`lateness of 20 tasks due in 200 ms: min ${late[0]} ms, median ${late[10]} ms, max ${late[19]} ms`);
      expect(late[0]).toBeGreaterThanOrEqual(0);
      expect(late[10]).toBeLessThanOrEqual(10);
      // A stall of the 2-core machine shared with MariaDB may hit a task or two (27, 34 and 44 ms
      // seen); the tight figures are the bench's (B1). What must hold: no batching window, no wait
      // for a refill, which would put the median and the rest hundreds of ms late.
      expect(late[18]).toBeLessThanOrEqual(60);
      expect(late[19]).toBeLessThanOrEqual(150);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it("gives the same results whatever the process TZ, the locale and MySQL's time_zone", async () => {
    await db.execute("SET GLOBAL time_zone = '+08:00'");
    try {
      const server = await startServer({
        env: { DATABASE_URL: db.url, TZ: 'America/Los_Angeles', LANG: 'de_DE.UTF-8', LC_ALL: 'de_DE.UTF-8', TIMEZONE: 'Asia/Shanghai' },
      });
      try {
        // A naive Shanghai wall-clock time 1.5 s from now, read in the service's TIMEZONE.
        const target = Temporal.Now.instant().add({ milliseconds: 1500 }).round({ smallestUnit: 'millisecond' });
        const naive = target.toZonedDateTimeISO('Asia/Shanghai').toPlainDateTime().toString();
        const { status, body } = await server.request('POST', '/tasks', {
          type: 'close_order',
          payload: { orderSn: orders[30]!.orderSn },
          runAt: naive,
        });
        expect(status).toBe(201);
        expect(body.runAt).toBe(target.toString({ fractionalSecondDigits: 3 }));
        expect(body.runAtLocal).toBe(`${naive.padEnd(23, '0')}+08:00`.replace(/(\.\d{3})\d*/, '$1'));
        const [row] = await db.query<any[]>('SELECT run_at, created_at FROM punctual_tasks WHERE id = ?', [body.id]);
        expect(row.run_at.getTime()).toBe(target.epochMilliseconds);
        expect(Math.abs(row.created_at.getTime() - Date.now())).toBeLessThan(5000);
        await waitFor(async () => !Number.isNaN((await lateness([body.id]))[0]), 5000, 'the task to run');
        const [late] = await lateness([body.id]);
        expect(late).toBeGreaterThanOrEqual(0);
        // A zone misread is hours off; on a loaded machine one firing can be tens of ms late (33 ms
        // once in CI). The tight figure is B1's, in npm run bench.
        expect(late).toBeLessThanOrEqual(500);
      } finally {
        expect(await server.stop()).toBe(0);
      }
    } finally {
      await db.execute('SET GLOBAL time_zone = SYSTEM');
    }
  });
});
