/**
 * Acquiring shards (SHARDING=on): the repairs a process runs on the shards it just took (misfired
 * tasks skipped, expired leases recovered) reach those shards only. What they recover, the
 * process arms, since it owns it; the tasks of shards it did not take are left to their owner,
 * and so are their row locks: the acquisition never waits for them.
 *
 * Two processes in this test process, on a real database: A holds every shard, then B joins and
 * takes its share from A. Neither refills nor reconciles while the test runs, so what changes is
 * the acquisition's doing.
 */
import type { PoolConnection } from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { shardsFor } from '../../src/cluster/rendezvous.js';
import { SHARDS, shardOf } from '../../src/cluster/shards.js';
import { SKIPPED_REASON } from '../../src/lifecycle/repair.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
const services: TestService[] = [];

/** Sharded, quick to hand shards over, and nothing else that would touch the rows meanwhile. */
const ENV = {
  SHARDING: 'on',
  LEASE_MS: '1500',
  HORIZON_MS: String(3600_000),
  REFILL_INTERVAL_MS: '60000',
  RECONCILE_INTERVAL_MS: String(24 * 3600_000),
  // Longer than the test waits: an acquisition that waited for the test's lock would show.
  LOCK_WAIT_TIMEOUT_S: '60',
};

beforeAll(async () => {
  db = await createTestDatabase('shard_acquire');
});

afterEach(async () => {
  for (const service of services.splice(0).reverse()) await service.stop();
});

afterAll(async () => {
  await db?.drop();
});

/** The first id above `from` whose shard `wanted` accepts. */
function idIn(from: number, wanted: (shard: number) => boolean): number {
  let id = from;
  while (!wanted(shardOf(id))) id++;
  return id;
}

async function rowOf(id: number): Promise<{ status: string; lease_owner: string | null; last_error: string | null }> {
  const [row] = await db.query<any[]>('SELECT status, lease_owner, last_error FROM punctual_tasks WHERE id = ?', [id]);
  return row;
}

describe('shards acquired', () => {
  it("repairs the acquired shards' tasks and arms them, and leaves the other shards' alone without waiting for their locks", async () => {
    const a = await startTestService(db, ENV);
    services.push(a);
    // Ready is not yet owning: A's own acquisition (its repairs, then the load of its shards) must be
    // over before the rows go in, or it reads and runs them as the ones it found there.
    await waitFor(
      async () =>
        a.logs.filter((line) => line.msg === 'acquired shards armed').reduce((sum, line) => sum + Number(line.shards), 0) === SHARDS,
      10_000,
      'the first process to have armed every shard',
    );
    const b = await startTestService(db, ENV, { boot: false });
    services.push(b);
    const bShards = shardsFor(b.owner, [a.owner, b.owner]);
    expect(bShards.size).toBeGreaterThan(0);
    expect(bShards.size).toBeLessThan(256);
    const mine = (from: number) => idIn(from, (shard) => bShards.has(shard));
    const theirs = (from: number) => idIn(from, (shard) => !bShards.has(shard));
    // Tasks in shards B will take from A, and in shards A keeps: an outside run whose process died
    // (its lease ran out), and an overdue task that asked to be skipped.
    const ids = { leaseMine: mine(1000), leaseTheirs: theirs(1000), lapsedMine: mine(2000), lapsedTheirs: theirs(2000) };
    const now = Date.now();
    const insert = 'INSERT INTO punctual_tasks (id, type, payload, run_at, status, attempts, misfire, lease_owner, lease_until) VALUES ?';
    const lease = (id: number) => [
      id,
      'close_order',
      '{"orderSn":"L"}',
      new Date(now + 600_000),
      'running',
      1,
      'run',
      'gone',
      new Date(now - 60_000),
    ];
    const lapsed = (id: number) => [id, 'close_order', '{"orderSn":"S"}', new Date(now - 600_000), 'pending', 0, 'skip', null, null];
    await db.execute(insert, [[lease(ids.leaseMine), lease(ids.leaseTheirs), lapsed(ids.lapsedMine), lapsed(ids.lapsedTheirs)]]);

    // A transaction of A's shard holds the row of the lease there, for as long as the test runs.
    const holder: PoolConnection = await db.pool.getConnection();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM punctual_tasks WHERE id = ? FOR UPDATE', [ids.leaseTheirs]);
      await b.boot();
      // B takes its shards as A hands them over: first the skip of those shards' misfired tasks…
      await waitFor(
        async () => (await rowOf(ids.lapsedMine)).status === 'skipped',
        20_000,
        'the misfired task of an acquired shard to be skipped',
      );
      expect(await rowOf(ids.lapsedMine)).toMatchObject({ status: 'skipped', last_error: SKIPPED_REASON });
      expect(await rowOf(ids.lapsedTheirs)).toMatchObject({ status: 'pending', last_error: null });
      // …then the recovery of their expired leases, whatever A's shard holds locked.
      await waitFor(
        async () => b.timers.has(ids.leaseMine) && (await rowOf(ids.leaseMine)).status === 'pending',
        20_000,
        'the expired lease of an acquired shard to be recovered and armed',
      );
      expect(await rowOf(ids.leaseMine)).toMatchObject({ status: 'pending', lease_owner: null });
      // Not B's shards: as they were, and A (which owns them) did nothing to them either.
      expect(await rowOf(ids.leaseTheirs)).toMatchObject({ status: 'running', lease_owner: 'gone' });
      expect(await rowOf(ids.lapsedTheirs)).toMatchObject({ status: 'pending', last_error: null });
      expect(b.timers.has(ids.leaseTheirs) || a.timers.has(ids.leaseTheirs)).toBe(false);
      expect(a.timers.has(ids.leaseMine)).toBe(false);
      const armed = b.logs.filter((line) => line.msg === 'acquired shards armed');
      expect(armed.reduce((sum, line) => sum + Number(line.recovered), 0)).toBe(1);
      expect(armed.reduce((sum, line) => sum + Number(line.skipped), 0)).toBe(1);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  });
});
