/**
 * Database outages, through a proxy between punctual and MariaDB: every connection cut and new
 * ones refused for a while; idle connections forgotten by a "gateway"; and a server-side
 * wait_timeout of two seconds (the 8-hour disconnect, shortened).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { Proxy } from '../helpers/proxy.js';
import { createTasks, startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, closeLateness, countStatus, createShopDatabase, makeOrders } from '../helpers/shop.js';
import { pick, report } from './scale.js';

const OUTAGE_MS = pick(4000, 10_000);
const orders = makeOrders(3000, 20, 'OU');
let db: TestDatabase;
let proxy: Proxy;
let server: ServerProcess | undefined;
let nextOrder = 0;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** close_order bodies for the next `count` orders, due `firstInMs` from now, `everyMs` apart. */
function closes(count: number, firstInMs: number, everyMs: number) {
  const first = Date.now() + firstInMs;
  return orders.slice(nextOrder, (nextOrder += count)).map((order, i) => ({
    type: 'close_order',
    payload: { orderSn: order.orderSn },
    runAt: first + i * everyMs,
  }));
}

beforeAll(async () => {
  db = await createShopDatabase('outage', orders);
  proxy = await new Proxy().start();
});

afterEach(async () => {
  if (server !== undefined) expect(await server.stop()).toBe(0);
  server = undefined;
});

afterAll(async () => {
  await proxy?.stop();
  await db?.drop();
});

describe('database outage', () => {
  it(
    `stays up through ${OUTAGE_MS / 1000} s without a database, and runs what came due within 2 s of its return`,
    { timeout: 120_000 },
    async () => {
      server = await startServer({ env: { DATABASE_URL: proxy.url(db.name) } });
      const ids = await createTasks(server, closes(600, 2000, Math.ceil((OUTAGE_MS + 6000) / 600)));
      // The outage begins once tasks are running.
      await waitFor(async () => (await countStatus(db, 'done', ids)) > 0, 15_000, 'the first tasks to run');
      proxy.cutAll();
      proxy.refuse(true);
      const downAt = Date.now();
      const readiness: number[] = [];
      while (Date.now() - downAt < OUTAGE_MS) {
        readiness.push((await server.request('GET', '/readyz')).status);
        expect((await server.request('GET', '/healthz')).status).toBe(200);
        await sleep(250);
      }
      // A create meets the outage with a 503 the shop can retry (with its key, safely).
      const refused = await server.request('POST', '/tasks', {
        type: 'close_order',
        payload: { orderSn: 'during' },
        delayMs: 0,
        key: 'outage:1',
      });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: 'PUNCTUAL_DATABASE_UNAVAILABLE' });
      proxy.refuse(false);
      const backAt = Date.now();
      await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 30_000, 'every task to run');
      const late = await closeLateness(db, ids);
      const dueInOutage = late.filter((row) => row.runAt >= downAt && row.runAt < backAt);
      const afterReturn = dueInOutage.map((row) => row.runAt + row.late - backAt);
      const check = await checkShop(db, orders);
      report('outage', {
        'outage ms': backAt - downAt,
        tasks: ids.length,
        'due during it': dueInOutage.length,
        'last of them run ms after return': Math.max(...afterReturn),
        'readyz answers while down': [...new Set(readiness)].join('/'),
        'refused connections': proxy.refused,
        'ran twice': check.ranTwice,
        runs: check.runs,
      });
      expect(server.child.exitCode).toBeNull();
      expect(readiness).toContain(503);
      expect(dueInOutage.length).toBeGreaterThan(0);
      expect(Math.max(...afterReturn)).toBeLessThanOrEqual(2000);
      expect((await server.request('GET', '/readyz')).status).toBe(200);
      expect(check).toMatchObject({ ranTwice: 0, stockMatches: true });
    },
  );

  it('goes on when a gateway forgets its idle connections (it learns so from a reset)', { timeout: 60_000 }, async () => {
    server = await startServer({ env: { DATABASE_URL: proxy.url(db.name) } });
    const before = await createTasks(server, closes(50, 200, 10));
    // Those ran, and the pool sits idle long enough to be forgotten.
    await waitFor(
      async () => (await countStatus(db, 'done', before)) === before.length && proxy.idle(1500) > 0,
      15_000,
      'the first tasks to run and the pool to sit idle',
    );
    const forgotten = proxy.forgetIdle(1500);
    const ids = await createTasks(server, closes(200, 500, 5));
    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 10_000, 'the tasks after the cut');
    const late = (await closeLateness(db, ids)).map((row) => row.late);
    report('idle connections forgotten', { forgotten, tasks: ids.length, 'worst lateness ms': Math.max(...late) });
    expect(forgotten).toBeGreaterThan(0);
    expect(Math.max(...late)).toBeLessThan(2000);
  });

  it(
    'goes on when the server closes idle connections after wait_timeout (the 8-hour disconnect, in 2 s)',
    { timeout: 60_000 },
    async () => {
      const [{ previous }] = await db.query<any[]>('SELECT @@GLOBAL.wait_timeout AS previous');
      await db.execute('SET GLOBAL wait_timeout = 2');
      try {
        server = await startServer({ env: { DATABASE_URL: db.url } });
        await createTasks(server, closes(20, 200, 10));
        await sleep(5000); // every pooled connection outlives wait_timeout
        const ids = await createTasks(server, closes(200, 500, 5));
        await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 10_000, 'the tasks after the timeout');
        const late = (await closeLateness(db, ids)).map((row) => row.late);
        report('wait_timeout 2 s', { 'idle s': 5, tasks: ids.length, 'worst lateness ms': Math.max(...late) });
        expect(Math.max(...late)).toBeLessThan(2000);
      } finally {
        await db.execute('SET GLOBAL wait_timeout = ?', [Number(previous)]);
      }
    },
  );
});
