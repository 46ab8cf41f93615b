/** Crash loop: tasks come due for a minute while the server is killed with SIGKILL again and again. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, countStatus, createShopDatabase, makeOrders } from '../helpers/shop.js';
import { pick, report } from './scale.js';

const N = pick(3000, 20_000);
const SPREAD_MS = pick(15_000, 60_000);
const KILLS = pick(10, 12);
const orders = makeOrders(N, 20, 'CL');
let db: TestDatabase;

beforeAll(async () => {
  db = await createShopDatabase('crash_loop', orders);
});

afterAll(async () => {
  await db?.drop();
});

describe('crash loop', () => {
  it(`loses nothing and closes nothing twice through ${KILLS} kill -9s`, { timeout: SPREAD_MS + 120_000 }, async () => {
    const env = { DATABASE_URL: db.url };
    let server: ServerProcess = await startServer({ env });
    // Inserted straight into the table, as a shop may; the refill arms them.
    const first = Date.now() + 3000;
    for (let i = 0; i < N; i += 1000) {
      const rows = orders
        .slice(i, i + 1000)
        .map((order, j) => [
          'close_order',
          JSON.stringify({ orderSn: order.orderSn }),
          new Date(first + Math.floor(((i + j) * SPREAD_MS) / N)),
        ]);
      await db.execute('INSERT INTO punctual_tasks (type, payload, run_at) VALUES ?', [rows]);
    }
    const [{ lo, hi }] = await db.query<any[]>('SELECT MIN(id) AS lo, MAX(id) AS hi FROM punctual_tasks');
    const ids = Array.from({ length: Number(hi) - Number(lo) + 1 }, (_, i) => Number(lo) + i);
    const killedAt: number[] = [];
    const doneAtKill: number[] = [];
    for (let k = 0; k < KILLS; k++) {
      // Random moments spread over the firing window.
      const at = first + ((k + Math.random()) * SPREAD_MS) / KILLS;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
      doneAtKill.push(await countStatus(db, 'done', ids));
      expect(await server.stop('SIGKILL')).toBeNull();
      killedAt.push(Math.round((Date.now() - first) / 100) / 10);
      server = await startServer({ env });
    }
    try {
      await waitFor(async () => (await countStatus(db, 'done', ids)) === N, 60_000, 'every task to run');
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const check = await checkShop(db, orders);
    const [attempts] = await db.query<any[]>('SELECT MIN(attempts) AS lo, MAX(attempts) AS hi FROM punctual_tasks');
    const [late] = await db.query<any[]>(
      `SELECT MAX(TIMESTAMPDIFF(MICROSECOND, t.run_at, o.closed_at)) / 1e6 AS worst FROM punctual_tasks t
         JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))`,
    );
    report('crash loop', {
      tasks: N,
      'due over s': SPREAD_MS / 1000,
      kills: killedAt.length,
      'killed at s': killedAt.join(' '),
      'done at each kill': doneAtKill.join(' '),
      closed: check.closed,
      'ran twice': check.ranTwice,
      runs: check.runs,
      'stock exact': check.stockMatches,
      'worst lateness s': Number(late.worst),
    });
    expect(doneAtKill.some((done) => done > 0 && done < N)).toBe(true);
    expect(check).toMatchObject({ closed: N, runs: N, ranTwice: 0, stockMatches: true });
    expect([Number(attempts.lo), Number(attempts.hi)]).toEqual([1, 1]);
  });
});
