/**
 * The sale's wall: 50,000 closes of low priority and 500 of high priority due at the same second.
 * Every high one runs well before the wall has drained (within 2 s of that second; without priority
 * they ran 11.9 s late, last). The 300 ms target is B11 of `npm run bench`, not a bound here: a
 * loaded 2-core machine measured 231-265 ms. The high ones are created last, so without priority
 * they would run last (the figure is printed).
 * Lateness is read from the database (orders.closed_at − tasks.run_at), as a shop sees it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { closeLateness, createShopDatabase, makeOrders } from '../helpers/shop.js';

const LOW = Number(process.env.WALL_LOW ?? 50_000);
const HIGH = 500;
const orders = makeOrders(LOW + HIGH);
let db: TestDatabase;

beforeAll(async () => {
  db = await createShopDatabase('priority_wall', orders);
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

async function createBatches(server: ServerProcess, bodies: unknown[]): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < bodies.length; i += 1000) {
    const { status, body } = await server.request('POST', '/tasks/batch', { tasks: bodies.slice(i, i + 1000) });
    if (status !== 200 || body.created !== Math.min(1000, bodies.length - i))
      throw new Error(`batch answered ${status}: ${JSON.stringify(body).slice(0, 300)}`);
    for (const item of body.results as { id: number }[]) ids.push(item.id);
  }
  return ids;
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

describe('priority', () => {
  it('500 high-priority closes due with a wall of 50,000 low ones all run first, within 2 s of their second', async () => {
    const server = await startServer({ env: { DATABASE_URL: db.url } });
    try {
      // Whole seconds, far enough ahead for every create to be in and armed.
      const at = Math.ceil((Date.now() + 15_000) / 1000) * 1000;
      const low = orders
        .slice(0, LOW)
        .map((order) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: at, priority: -5 }));
      const high = orders.slice(LOW).map((order) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: at, priority: 5 }));
      const lowIds = await createBatches(server, low);
      const highIds = await createBatches(server, high);
      expect(Date.now()).toBeLessThan(at - 1000);
      await waitFor(
        async () => Date.now() > at && (await closeLateness(db, highIds)).every((row) => !Number.isNaN(row.late)),
        60_000,
        'the high ones to run',
      );
      await waitFor(
        async () => {
          const [row] = await db.query<({ n: number } & import('mysql2').RowDataPacket)[]>(
            "SELECT COUNT(*) AS n FROM orders WHERE status = 'closed'",
          );
          return Number(row!.n) === LOW + HIGH;
        },
        120_000,
        'the wall to drain',
      );
      const highLate = (await closeLateness(db, highIds)).map((row) => row.late).sort((a, b) => a - b);
      const lowLate = (await closeLateness(db, lowIds)).map((row) => row.late).sort((a, b) => a - b);
      console.log(
        `priority wall: ${HIGH} high: p50 ${quantile(highLate, 0.5)} ms, max ${highLate.at(-1)} ms; ` +
          `${LOW} low: p50 ${quantile(lowLate, 0.5)} ms, max ${lowLate.at(-1)} ms (the wall drained)`,
      );
      expect(highLate[0]).toBeGreaterThanOrEqual(0);
      expect(lowLate[0]).toBeGreaterThanOrEqual(0);
      expect(highLate.at(-1)).toBeLessThanOrEqual(2000);
      // The wall was a wall: its last ones ran well after every high one.
      expect(lowLate.at(-1)).toBeGreaterThan(highLate.at(-1)!);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 240_000);
});
