import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTasks, startServer, waitFor } from '../helpers/server.js';
import { checkShop, closeLateness, countStatus, createShop, insertOrders, makeOrders } from '../helpers/shop.js';

let db: TestDatabase;
const orders = makeOrders(400);

beforeAll(async () => {
  // Not created here: the server creates the database named in DATABASE_URL and migrates it.
  db = await createTestDatabase('restart', { create: false });
});

afterAll(async () => {
  await db?.drop();
});

const count = (status: string, ids: number[]) => countStatus(db, status, ids);

describe('restart', () => {
  it('creates its database, and after a clean stop and a start runs every task once, on time', async () => {
    const env = { DATABASE_URL: db.url, MISFIRE_GRACE_MS: '500' };
    const first = await startServer({ env });
    await createShop(db);
    await insertOrders(db, orders);

    // Due after the restart: they must run at their time, armed by the second process.
    const soon = Date.now() + 6000;
    const onTime = await createTasks(
      first,
      orders.slice(0, 300).map((order, i) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: soon + i * 3 })),
    );
    // Due while the service is down: misfire decides.
    const whileDown = Date.now() + 300;
    const [runLate, skip] = await createTasks(first, [
      { type: 'close_order', payload: { orderSn: orders[300]!.orderSn }, runAt: whileDown, misfire: 'run' },
      { type: 'close_order', payload: { orderSn: orders[301]!.orderSn }, runAt: whileDown, misfire: 'skip' },
    ]);
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(await count('pending', [...onTime, runLate!, skip!])).toBe(onTime.length + 2);

    // Down past the misfire grace (500 ms) of the tasks due meanwhile, by the database's clock.
    await waitFor(
      async () => {
        const [row] = await db.query<any[]>(
          'SELECT MAX(run_at) < UTC_TIMESTAMP(3) - INTERVAL 600000 MICROSECOND AS past FROM punctual_tasks WHERE id IN (?)',
          [[runLate, skip]],
        );
        return Number(row.past) === 1;
      },
      10_000,
      'the misfire grace to pass',
    );
    const second = await startServer({ env });
    const readyAt = Date.now();
    try {
      // Skipped at boot, before anything ran: the row says so as soon as the process is ready.
      expect(await count('skipped', [skip!])).toBe(1);
      await waitFor(async () => (await count('done', [...onTime, runLate!])) === onTime.length + 1, 15_000, 'every task to run');
      expect(await count('skipped', [skip!])).toBe(1);

      const late = await closeLateness(db, onTime);
      expect(Math.min(...late.map((row) => row.late))).toBeGreaterThanOrEqual(0); // never early
      // Those due once the second process was up ran at their time (precision itself is measured
      // on a quiet machine by the timing tests; here other tests share the CPU).
      const afterBoot = late
        .filter((row) => row.runAt > readyAt)
        .map((row) => row.late)
        .sort((a, b) => a - b);
      expect(afterBoot.length).toBeGreaterThan(onTime.length / 2);
      expect(afterBoot[Math.floor(afterBoot.length * 0.99)]).toBeLessThan(500);
      const check = await checkShop(db, orders);
      expect(check).toMatchObject({ closed: onTime.length + 1, ranTwice: 0, stockMatches: true });
    } finally {
      expect(await second.stop('SIGINT')).toBe(0);
    }
  });
});
