/**
 * Several real processes sharing the tasks by shard leases (SHARDING=on) on one MariaDB.
 *
 * Who ran what is read from each process's log: its 'shards acquired' lines (which shards, when)
 * and its 'task done' lines (which task, when its run began). A run is rightful when the process
 * that ran it was the last to acquire the task's shard (id MOD 256) before the run began; the
 * effects ledger (close_runs) counts committed runs, so a task run twice is counted too.
 */
import type { RowDataPacket } from 'mysql2';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { createTasks, killLeftoverServers, startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, closeLateness, countStatus, createShopDatabase, makeOrders, type Order } from '../helpers/shop.js';

const SHARDS = 256;
const LEASE_MS = 3000;
const PERIOD_MS = LEASE_MS / 3;

const databases: TestDatabase[] = [];

afterEach(() => {
  killLeftoverServers();
});

afterAll(async () => {
  for (const db of databases) await db.drop();
});

interface Member {
  server: ServerProcess;
  id: string;
}

async function shopDatabase(label: string, orders: Order[]): Promise<TestDatabase> {
  const db = await createShopDatabase(label, orders);
  databases.push(db);
  return db;
}

async function start(db: TestDatabase, count: number, extra: Record<string, string> = {}): Promise<Member[]> {
  const env = { DATABASE_URL: db.url, SHARDING: 'on', LEASE_MS: String(LEASE_MS), REFILL_INTERVAL_MS: '200', ...extra };
  const servers = await Promise.all(Array.from({ length: count }, () => startServer({ env })));
  return Promise.all(servers.map(async (server) => ({ server, id: (await server.request('GET', '/cluster')).body.self as string })));
}

/** Shards with a valid lease, by owner. */
async function leaseCounts(db: TestDatabase): Promise<Map<string, number>> {
  const rows = await db.query<({ owner: string; n: number } & RowDataPacket)[]>(
    'SELECT owner, COUNT(*) AS n FROM shard_leases WHERE owner IS NOT NULL AND lease_until > UTC_TIMESTAMP(3) GROUP BY owner',
  );
  return new Map(rows.map((row) => [row.owner, Number(row.n)]));
}

async function shardsOf(db: TestDatabase, owner: string): Promise<Set<number>> {
  const rows = await db.query<({ shard: number } & RowDataPacket)[]>(
    'SELECT shard FROM shard_leases WHERE owner = ? AND lease_until > UTC_TIMESTAMP(3)',
    [owner],
  );
  return new Set(rows.map((row) => Number(row.shard)));
}

/** Every shard held by one of `members`, each holding about 256/N, and each process agreeing. */
async function balanced(db: TestDatabase, members: Member[]): Promise<boolean> {
  const counts = await leaseCounts(db);
  const held = members.map((member) => counts.get(member.id) ?? 0);
  if (held.reduce((a, b) => a + b, 0) !== SHARDS) return false;
  if (held.some((n) => n < (SHARDS / members.length) * 0.6 || n > (SHARDS / members.length) * 1.4)) return false;
  const said = await Promise.all(members.map(async (member) => (await member.server.request('GET', '/readyz')).body.shards as number));
  return said.every((n, i) => n === held[i]);
}

/** Runs whose process did not hold the task's shard when the run began (the last acquirer before it). */
function wrongfulRuns(members: Member[]): { taskId: number; by: string; owner: string | undefined }[] {
  const acquired: { time: number; shard: number; id: string }[] = [];
  for (const { server, id } of members) {
    for (const line of server.logs) {
      if (line.msg !== 'shards acquired') continue;
      for (const shard of line.shards as number[]) acquired.push({ time: Number(line.time), shard, id });
    }
  }
  acquired.sort((a, b) => a.time - b.time);
  const wrong: { taskId: number; by: string; owner: string | undefined }[] = [];
  for (const { server, id } of members) {
    for (const line of server.logs) {
      if (line.msg !== 'task done') continue;
      const taskId = Number(line.taskId);
      const startedAt = Number(line.startedAt);
      let owner: string | undefined;
      for (const event of acquired) {
        if (event.time > startedAt) break;
        if (event.shard === taskId % SHARDS) owner = event.id;
      }
      if (owner !== id) wrong.push({ taskId, by: id, owner });
    }
  }
  return wrong;
}

async function metric(server: ServerProcess, name: string): Promise<number> {
  return parsePrometheus(await (await fetch(`${server.baseUrl}/metrics`)).text()).get(name) ?? 0;
}

/** `orders` as close_order tasks from `firstDue` on, spread over `spreadMs`: 600 through the API (spread over the processes), the rest straight into the table. */
async function enqueue(db: TestDatabase, members: Member[], orders: Order[], firstDue: number, spreadMs: number): Promise<number[]> {
  const runAt = (i: number) => firstDue + Math.floor((i * spreadMs) / orders.length);
  const half = Math.min(600, Math.floor(orders.length / 2));
  const viaApi = orders.slice(0, half).map((order, i) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: runAt(i) }));
  const share = Math.ceil(viaApi.length / members.length);
  const ids = (await Promise.all(members.map((m, k) => createTasks(m.server, viaApi.slice(k * share, (k + 1) * share), 8)))).flat();
  // A shop's own inserts, with every other column left to its default.
  const rows = orders.slice(half).map((order, i) => ['close_order', JSON.stringify({ orderSn: order.orderSn }), new Date(runAt(half + i))]);
  await db.execute('INSERT INTO tasks (type, payload, run_at) VALUES ?', [rows]);
  expect(ids).toHaveLength(half);
  return allIds(db);
}

/** Every task of the test's database (they are all the test's). */
async function allIds(db: TestDatabase): Promise<number[]> {
  return (await db.query<({ id: number } & RowDataPacket)[]>('SELECT id FROM tasks ORDER BY id')).map((row) => Number(row.id));
}

async function pendingIn(db: TestDatabase, shards: Set<number>): Promise<number> {
  if (shards.size === 0) return 0;
  const [row] = await db.query<({ n: number } & RowDataPacket)[]>(
    "SELECT COUNT(*) AS n FROM tasks WHERE status = 'pending' AND id MOD 256 IN (?)",
    [[...shards]],
  );
  return Number(row?.n ?? 0);
}

describe('shard leases among several processes', () => {
  it('give each process its own tasks: none lost, none twice, each armed in one process only', async () => {
    const orders = makeOrders(3000);
    const db = await shopDatabase('shards_three', orders);
    const members = await start(db, 3);
    await waitFor(() => balanced(db, members), 20_000, 'the shards to be shared out');
    // Any process answers for the whole cluster; each one's metrics say what it holds.
    const cluster = (await members[0]!.server.request('GET', '/cluster')).body;
    expect(cluster).toMatchObject({ sharding: true, shards: SHARDS, unowned: 0, leaseMs: LEASE_MS, self: members[0]!.id });
    const live = cluster.members.filter((m: { live: boolean }) => m.live);
    expect(live.map((m: { id: string }) => m.id).sort()).toEqual(members.map((m) => m.id).sort());
    expect(live.reduce((sum: number, m: { shards: number }) => sum + m.shards, 0)).toBe(SHARDS);
    for (const member of members) {
      const held = (await member.server.request('GET', '/readyz')).body.shards as number;
      expect(await metric(member.server, 'punctual_shards_owned')).toBe(held);
      expect(await metric(member.server, 'punctual_members')).toBe(3);
      expect(await metric(member.server, 'punctual_lease_renewals_total')).toBeGreaterThan(0);
      expect(live.find((m: { id: string }) => m.id === member.id).shards).toBe(held);
    }
    const firstDue = Date.now() + 12_000;
    const ids = await enqueue(db, members, orders, firstDue, 10_000);
    console.log(`enqueued with ${firstDue - Date.now()} ms to spare`);

    // Before the first task is due: each process has armed exactly the pending tasks of its own
    // shards, and together every pending task once.
    let seen = '';
    const armedRight = async () => {
      const pending = await countStatus(db, 'pending', ids);
      const armed: number[] = [];
      const own: number[] = [];
      for (const member of members) {
        armed.push((await member.server.request('GET', '/readyz')).body.armed as number);
        own.push(await pendingIn(db, await shardsOf(db, member.id)));
      }
      seen = `pending ${pending} of ${ids.length}, armed ${armed.join('/')}, pending in own shards ${own.join('/')}`;
      return pending === ids.length && armed.every((n, i) => n === own[i]) && armed.reduce((x, y) => x + y, 0) === pending;
    };
    await waitFor(armedRight, Math.max(1000, firstDue - Date.now() - 500), 'each process to arm the tasks of its shards').catch(
      (error: Error) => {
        throw new Error(`${error.message}: ${seen}`);
      },
    );

    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 60_000, 'every task to run');
    const ran = await Promise.all(members.map((m) => metric(m.server, 'punctual_task_runs_total{type="close_order",outcome="done"}')));
    expect(ran.reduce((a, b) => a + b, 0)).toBe(ids.length);
    for (const n of ran) expect(n).toBeGreaterThan(0);
    expect(wrongfulRuns(members)).toEqual([]);
    const check = await checkShop(db, orders);
    expect(check).toMatchObject({ closed: orders.length, runs: ids.length, ranTwice: 0, stockMatches: true });
    const late = (await closeLateness(db, ids)).map((entry) => entry.late).sort((a, b) => a - b);
    console.log(
      `3 processes, ${ids.length} tasks: lateness p50 ${late[Math.floor(late.length / 2)]} ms, p99 ${late[Math.floor(late.length * 0.99)]} ms, armed by ${ran.join('/')} runs`,
    );
    expect(await Promise.all(members.map((m) => m.server.stop()))).toEqual([0, 0, 0]);
    expect((await leaseCounts(db)).size).toBe(0); // a clean stop releases its leases at once // a clean stop releases its leases at once
  }, 150_000);

  it('take a killed process’s shards over within about a lease, and run its tasks late by no more', async () => {
    const orders = makeOrders(3000);
    const db = await shopDatabase('shards_kill', orders);
    const members = await start(db, 3);
    await waitFor(() => balanced(db, members), 20_000, 'the shards to be shared out');
    const firstDue = Date.now() + 6000;
    const ids = await enqueue(db, members, orders, firstDue, 10_000);
    const [a, b, victim] = members as [Member, Member, Member];
    const victimShards = await shardsOf(db, victim.id);
    await waitFor(async () => Date.now() > firstDue + 3000, 20_000, 'the runs to be under way');

    victim.server.child.kill('SIGKILL');
    const killedAt = Date.now();
    await victim.server.exited;
    await waitFor(
      async () => {
        const counts = await leaseCounts(db);
        return (counts.get(a.id) ?? 0) + (counts.get(b.id) ?? 0) === SHARDS;
      },
      LEASE_MS + PERIOD_MS + 10_000,
      'the live processes to hold every shard',
    );
    const takeoverMs = Date.now() - killedAt;

    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 60_000, 'every task to run');
    const check = await checkShop(db, orders);
    expect(check).toMatchObject({ closed: orders.length, ranTwice: 0, stockMatches: true });
    expect(check.runs).toBe(ids.length);
    expect(wrongfulRuns(members)).toEqual([]);
    // The victim's tasks that fell due from the kill on ran late by about the takeover at most.
    const orphans = (await closeLateness(db, ids)).filter((t) => victimShards.has(t.id % SHARDS) && t.runAt >= killedAt);
    const worst = Math.max(...orphans.map((t) => t.late));
    console.log(
      `kill -9: all ${SHARDS} shards owned again after ${takeoverMs} ms (lease ${LEASE_MS} ms); its tasks ran at most ${Math.round(worst)} ms late`,
    );
    expect(orphans.length).toBeGreaterThan(0);
    // Lease + one renewal period, with room for a loaded machine; the figure is reported above.
    expect(takeoverMs).toBeLessThan(LEASE_MS + PERIOD_MS + 3000);
    expect(worst).toBeLessThan(LEASE_MS + PERIOD_MS + 3000);
    expect(await Promise.all([a.server.stop(), b.server.stop()])).toEqual([0, 0]);
  }, 150_000);

  it('fence a paused process out: after SIGCONT it claims nothing of the shards it lost', async () => {
    const orders = makeOrders(1800);
    const db = await shopDatabase('shards_pause', orders);
    const members = await start(db, 3);
    const [a, b, paused] = members as [Member, Member, Member];
    await waitFor(() => balanced(db, members), 20_000, 'the shards to be shared out');
    const pausedShards = await shardsOf(db, paused.id);
    // Every task due at one instant, well after the paused process's leases ran out.
    const due = Date.now() + 12_000;
    const rows = orders.map((order) => ['close_order', JSON.stringify({ orderSn: order.orderSn }), new Date(due)]);
    await db.execute('INSERT INTO tasks (type, payload, run_at) VALUES ?', [rows]);
    const ids = await allIds(db);
    await waitFor(
      async () => (await paused.server.request('GET', '/readyz')).body.armed === (await pendingIn(db, pausedShards)),
      5000,
      'the paused process to arm its tasks',
    );

    paused.server.child.kill('SIGSTOP');
    try {
      await waitFor(
        async () => {
          const counts = await leaseCounts(db);
          return (counts.get(a.id) ?? 0) + (counts.get(b.id) ?? 0) === SHARDS;
        },
        LEASE_MS + PERIOD_MS + 5000,
        'the others to take the paused process’s shards',
      );
      expect(Date.now()).toBeLessThan(due);
      // Wake it just after the tasks fell due: its timers for them fire at once, racing the new owners.
      await waitFor(async () => Date.now() >= due + 20, 15_000, 'the tasks to fall due');
    } finally {
      paused.server.child.kill('SIGCONT');
    }

    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 60_000, 'every task to run');
    const wrong = wrongfulRuns(members);
    const fenced = await metric(paused.server, 'punctual_fenced_claims_total');
    const losses = await metric(paused.server, 'punctual_lease_losses_total');
    console.log(
      `SIGSTOP: ${pausedShards.size} shards lost (${losses} counted), ${fenced} fired tasks fenced off, ${wrong.length} wrongful runs`,
    );
    expect(wrong).toEqual([]);
    expect(losses).toBeGreaterThan(0);
    const check = await checkShop(db, orders);
    expect(check).toMatchObject({ closed: orders.length, runs: ids.length, ranTwice: 0, stockMatches: true });
    // It takes part again: the shards are shared among the three once more.
    await waitFor(() => balanced(db, members), 20_000, 'the shards to be shared out again');
    expect(await Promise.all(members.map((m) => m.server.stop()))).toEqual([0, 0, 0]);
  }, 150_000);

  it('rebalance when a process joins and another leaves while tasks fire, no shard left without owner for long', async () => {
    const orders = makeOrders(3000);
    const db = await shopDatabase('shards_churn', orders);
    const [a, b] = (await start(db, 2)) as [Member, Member];
    await waitFor(() => balanced(db, [a, b]), 20_000, 'the shards to be shared out');

    // Watch the leases: for each shard, the longest time it had no live owner.
    const since = new Map<number, number>();
    const longest = new Map<number, number>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const rows = await db.query<({ shard: number; held: number } & RowDataPacket)[]>(
          // Held: a valid lease of a live member (a process that left is no owner, whatever its lease says).
          `SELECT s.shard, s.lease_until > UTC_TIMESTAMP(3) AND m.heartbeat_at > UTC_TIMESTAMP(3) - INTERVAL ${LEASE_MS * 1000} MICROSECOND AS held
             FROM shard_leases s LEFT JOIN members m ON m.id = s.owner`,
        );
        const now = Date.now();
        for (const row of rows) {
          const shard = Number(row.shard);
          if (Number(row.held) === 1) since.delete(shard);
          else {
            if (!since.has(shard)) since.set(shard, now);
            longest.set(shard, Math.max(longest.get(shard) ?? 0, now - since.get(shard)!));
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    const firstDue = Date.now() + 6000;
    const ids = await enqueue(db, [a, b], orders, firstDue, 12_000);
    await waitFor(async () => Date.now() > firstDue + 2000, 20_000, 'the runs to be under way');
    const [c] = (await start(db, 1)) as [Member];
    await waitFor(() => balanced(db, [a, b, c]), 20_000, 'the newcomer to get its share');
    expect(await b.server.stop()).toBe(0);
    await waitFor(() => balanced(db, [a, c]), 20_000, 'the leaver’s shards to be taken over');
    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 60_000, 'every task to run');
    watching = false;
    await watch;

    const worst = Math.max(0, ...longest.values());
    console.log(`join + leave: the longest a shard had no owner was ${worst} ms (renewal period ${PERIOD_MS} ms)`);
    // One renewal period, plus the polling step and room for a loaded machine.
    expect(worst).toBeLessThan(PERIOD_MS + 1500);
    expect(wrongfulRuns([a, b, c])).toEqual([]);
    const check = await checkShop(db, orders);
    expect(check).toMatchObject({ closed: orders.length, runs: ids.length, ranTwice: 0, stockMatches: true });
    expect(await Promise.all([a.server.stop(), c.server.stop()])).toEqual([0, 0]);
  }, 180_000);
});
