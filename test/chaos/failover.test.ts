/**
 * A DATABASE_URL with two hosts, each a proxy to the same MariaDB: the first one dies (every
 * connection cut, new ones refused, for good) and punctual goes on through the second without
 * waiting for the first to return: nothing lost, nothing run twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { Proxy } from '../helpers/proxy.js';
import { createTasks, startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, countStatus, createShopDatabase, makeOrders } from '../helpers/shop.js';
import { pick, report } from './scale.js';

const TASKS = pick(400, 2000);
const orders = makeOrders(TASKS, 20, 'FO');
let db: TestDatabase;
let first: Proxy;
let second: Proxy;
let server: ServerProcess | undefined;

beforeAll(async () => {
  db = await createShopDatabase('failover', orders);
  first = await new Proxy().start();
  second = await new Proxy().start();
});

afterAll(async () => {
  if (server !== undefined) await server.stop();
  await first?.stop();
  await second?.stop();
  await db?.drop();
});

describe('several database hosts', () => {
  it('move to the next host when the first dies, and run every task once', { timeout: 120_000 }, async () => {
    const url = `mysql://root@127.0.0.1:${first.port},127.0.0.1:${second.port}/${db.name}`;
    server = await startServer({ env: { DATABASE_URL: url } });
    // Only the first host is used while it answers.
    expect(first.accepted).toBeGreaterThan(0);
    expect(second.accepted).toBe(0);
    const start = Date.now() + 1500;
    const spread = pick(4000, 10_000);
    const ids = await createTasks(
      server,
      orders.map((order, i) => ({
        type: 'close_order',
        payload: { orderSn: order.orderSn },
        runAt: start + Math.floor((i * spread) / orders.length),
      })),
    );
    // Halfway through, the first host dies and stays dead.
    await waitFor(async () => (await countStatus(db, 'done', ids)) >= ids.length / 4 || undefined, 30_000, 'a quarter run');
    first.refuse(true);
    first.cutAll();
    const cutAt = Date.now();
    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length || undefined, 60_000, 'every task to run');
    const check = await checkShop(db, orders);
    const switched = server.logs.filter((line) => line.msg.includes('new connections go to the next host'));
    report('failover to the second host', {
      tasks: ids.length,
      'all done ms after the cut': Date.now() - cutAt,
      'connections refused by the dead host': first.refused,
      'connections to the second host': second.accepted,
      runs: check.runs,
      'ran twice': check.ranTwice,
    });
    expect(switched.length).toBeGreaterThan(0);
    expect(second.accepted).toBeGreaterThan(0);
    expect(check).toMatchObject({ ranTwice: 0, stockMatches: true });
    expect(check.runs).toBe(ids.length);
    expect((await server.request('GET', '/readyz')).status).toBe(200);
    // The API works through the second host too.
    const [late] = await createTasks(server, [{ type: 'close_order', payload: { orderSn: 'none' }, delayMs: 60_000 }]);
    expect(late).toBeGreaterThan(0);
    expect(server.child.exitCode).toBeNull();
  });
});
