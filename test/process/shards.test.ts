/**
 * Several real processes sharing the tasks by shard leases (SHARDING=on) on one MariaDB. Who ran
 * what, and whether each run was rightful, is read from the processes' logs (test/helpers/shards.ts).
 */
import type { RowDataPacket } from 'mysql2';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { killLeftoverServers, launchServer, waitFor } from '../helpers/server.js';
import {
  SHARDS,
  allIds,
  balanced,
  enqueue,
  holdAll,
  leaseCounts,
  metric,
  pendingIn,
  shardsOf,
  startMembers,
  waitArmedInOwnShards,
  wrongfulRuns,
  type Member,
} from '../helpers/shards.js';
import { checkShop, closeLateness, countStatus, createShopDatabase, makeOrders, type Order } from '../helpers/shop.js';

const LEASE_MS = 3000;
const PERIOD_MS = LEASE_MS / 3;

const databases: TestDatabase[] = [];

afterEach(() => {
  killLeftoverServers();
});

afterAll(async () => {
  for (const db of databases) await db.drop();
});

async function shopDatabase(label: string, orders: Order[]): Promise<TestDatabase> {
  const db = await createShopDatabase(label, orders);
  databases.push(db);
  return db;
}

function start(db: TestDatabase, count: number): Promise<Member[]> {
  const env = { DATABASE_URL: db.url, LEASE_MS: String(LEASE_MS), REFILL_INTERVAL_MS: '200' };
  return startMembers(Array.from({ length: count }, () => env));
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
    await waitArmedInOwnShards(db, members, ids, firstDue - Date.now() - 500);

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
    expect((await leaseCounts(db)).size).toBe(0); // a clean stop releases its leases at once
  }, 150_000);

  it('hold their leases through the next host of a DATABASE_URL whose first host does not answer', async () => {
    const db = await shopDatabase('shards_hosts', []);
    // A closed port first: the pool and the lease keeper's own connection both move on to the server.
    const url = db.url.replace(/^mysql:\/\/([^@]*@)/, 'mysql://$1127.0.0.1:1,');
    expect(url).toContain('127.0.0.1:1,');
    const [member] = await startMembers([{ DATABASE_URL: url, LEASE_MS: String(LEASE_MS) }]);
    await waitFor(() => holdAll(db, [member!]), 10_000, 'the process to hold every shard');
    const renewals = await metric(member!.server, 'punctual_lease_renewals_total');
    await waitFor(
      async () => (await metric(member!.server, 'punctual_lease_renewals_total')) > renewals || undefined,
      LEASE_MS,
      'a renewal',
    );
    expect(await member!.server.stop()).toBe(0);
  });

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
    await waitFor(() => holdAll(db, [a, b]), LEASE_MS + PERIOD_MS + 10_000, 'the live processes to hold every shard');
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
    await db.execute('INSERT INTO punctual_tasks (type, payload, run_at) VALUES ?', [rows]);
    const ids = await allIds(db);
    await waitFor(
      async () => (await paused.server.request('GET', '/readyz')).body.armed === (await pendingIn(db, pausedShards)),
      5000,
      'the paused process to arm its tasks',
    );

    paused.server.child.kill('SIGSTOP');
    try {
      await waitFor(() => holdAll(db, [a, b]), LEASE_MS + PERIOD_MS + 5000, 'the others to take the paused process’s shards');
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
             FROM punctual_shard_leases s LEFT JOIN punctual_members m ON m.id = s.owner`,
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

  it('make a joining process unready until it holds its shards, saying why, while the process already there stays ready', async () => {
    const db = await shopDatabase('shards_ready', []);
    const [first] = await start(db, 1);
    await waitFor(() => holdAll(db, [first!]), 10_000, 'the first process to hold every shard');
    const joining = launchServer({ env: { SHARDING: 'on', DATABASE_URL: db.url, LEASE_MS: String(LEASE_MS) } });
    const address = await joining.ready;
    const seen: { status: number; body: { status: string; shards?: number; reason?: string } }[] = [];
    const firstStatuses = new Set<number>();
    await waitFor(
      async () => {
        const [answer, old] = await Promise.all([fetch(`${address}/readyz`), first!.server.request('GET', '/readyz')]);
        firstStatuses.add(old.status);
        seen.push({ status: answer.status, body: (await answer.json()) as (typeof seen)[number]['body'] });
        return answer.status === 200;
      },
      10_000,
      'the joining process to be ready',
    );
    // Right after "punctual is ready" the first process still holds the joiner's shards.
    expect(seen[0]).toMatchObject({
      status: 503,
      body: { status: 'starting', reason: expect.stringMatching(/^holds \d+ of the \d+ shards it is to own/) },
    });
    const ready = seen.at(-1)!.body;
    const id = (await fetch(`${address}/cluster`).then((answer) => answer.json())) as { self: string };
    expect(ready.shards).toBe((await shardsOf(db, id.self)).size);
    expect(ready.shards).toBeGreaterThan(SHARDS * 0.3);
    expect(joining.logs.some((line) => line.msg === 'holds its shards')).toBe(true);
    expect([...firstStatuses]).toEqual([200]);
    joining.child.kill('SIGTERM');
    expect(await joining.exited).toBe(0);
  });
});
