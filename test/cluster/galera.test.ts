/**
 * punctual on a three-node Galera cluster (scripts/cluster.sh): two processes, each writing
 * through its own node, share the tasks; then the node of one of them is killed (-9) under load.
 * Nothing is lost, nothing runs twice, the stock is exact, and no attempt is spent on the write
 * conflicts between the nodes (Galera reports them at COMMIT).
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { conflicts, killNode, restartNode, urlFrom } from '../helpers/galera.js';
import { createTasks, startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, countStatus, createShopDatabase, makeOrders, type Order } from '../helpers/shop.js';

const orders = makeOrders(3500, 20, 'GA');
let db: TestDatabase;
let next = 0;
const servers: ServerProcess[] = [];

function closes(list: Order[], firstInMs: number, spreadMs: number) {
  const first = Date.now() + firstInMs;
  return list.map((order, i) => ({
    type: 'close_order',
    payload: { orderSn: order.orderSn },
    runAt: first + Math.floor((i * spreadMs) / list.length),
  }));
}

/** Creates the tasks of `list` half through each server. */
async function createThroughBoth(list: Order[], firstInMs: number, spreadMs: number): Promise<number[]> {
  const bodies = closes(list, firstInMs, spreadMs);
  const half = Math.ceil(bodies.length / 2);
  const [a, b] = await Promise.all([createTasks(servers[0]!, bodies.slice(0, half), 8), createTasks(servers[1]!, bodies.slice(half), 8)]);
  return [...a, ...b];
}

async function maxAttempts(ids: number[]): Promise<number> {
  const [row] = await db.query<mysql.RowDataPacket[]>('SELECT MAX(attempts) AS n FROM punctual_tasks WHERE id IN (?)', [ids]);
  return Number(row?.n);
}

beforeAll(async () => {
  // The test's own connections go to node 1; the processes write through nodes 2 and 3.
  db = await createShopDatabase('galera', orders);
  for (const first of [2, 3]) {
    servers.push(await startServer({ env: { DATABASE_URL: urlFrom(first, db.name), LOG_LEVEL: 'info' }, timeoutMs: 60_000 }));
  }
});

afterAll(async () => {
  for (const server of servers) await server.stop();
  await db?.drop();
});

describe('on a Galera cluster', () => {
  it('two processes on two nodes run 2,000 tasks over 10 s: none lost, none twice, no attempt spent on conflicts', async () => {
    const list = orders.slice(next, (next += 2000));
    const before = await conflicts();
    const ids = await createThroughBoth(list, 2000, 10_000);
    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 120_000, 'every task to run');
    const check = await checkShop(db, orders);
    const seen = (await conflicts()) - before;
    console.log(
      `[cluster] 2 processes, ${ids.length} tasks: runs ${check.runs}, ran twice ${check.ranTwice}, write conflicts between nodes ${seen}`,
    );
    expect(check).toMatchObject({ ranTwice: 0, stockMatches: true, runs: ids.length });
    expect(await maxAttempts(ids)).toBe(1);
  });

  it('a process whose node is killed (-9) under load moves to another node: nothing lost, nothing twice', async () => {
    const list = orders.slice(next, (next += 1500));
    const ids = await createThroughBoth(list, 2000, 10_000);
    const [victim] = servers;
    // Under load: some of these tasks have run.
    await waitFor(async () => (await countStatus(db, 'done', ids)) >= ids.length / 5 || undefined, 60_000, 'a fifth run');
    // Timed from before the call: the kill happens while the script runs.
    const killedAt = Date.now();
    killNode(2);
    try {
      // Recovered: the process whose node died writes again (through another node).
      let probe = 0;
      await waitFor(
        async () => {
          const { status } = await victim!.request('POST', '/tasks', {
            type: 'close_order',
            payload: { orderSn: `probe-${probe++}` },
            delayMs: 3_600_000,
          });
          return status === 201 || undefined;
        },
        60_000,
        'the process to write again',
      );
      const recoveredMs = Date.now() - killedAt;
      await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 120_000, 'every task to run');
      const allDoneMs = Date.now() - killedAt;
      const check = await checkShop(db, orders);
      const switches = victim!.logs.filter((line) => line.msg.includes('new connections go to the next host'));
      const switchLine = switches.find((line) => typeof line.time === 'number' && line.time >= killedAt);
      const switched = switchLine !== undefined;
      const switchedMs = typeof switchLine?.time === 'number' ? switchLine.time - killedAt : Number.NaN;
      console.log(
        `[cluster] node killed under load: the process moved to the next host after ${switchedMs} ms and wrote again after ${recoveredMs} ms; all ${ids.length} tasks done ${allDoneMs} ms after the kill; runs ${check.runs}, ran twice ${check.ranTwice}`,
      );
      expect(switched).toBe(true);
      expect(check).toMatchObject({ ranTwice: 0, stockMatches: true, runs: next });
      expect(victim!.child.exitCode).toBeNull();
    } finally {
      // The node comes back and rejoins (IST from the others), so the tests after this one see three nodes.
      console.log(`[cluster] node 2 rejoined in ${await restartNode(2)} ms`);
    }
  });
});
