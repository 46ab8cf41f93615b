/**
 * shard_leases.epoch as a fencing token, against MariaDB with two real lease keepers in this
 * process: a claim decided under one tenure of a shard is refused once that tenure ended, even
 * when the same process holds the shard again (at a higher epoch) and its memory says it may
 * claim.
 */
import { pino } from 'pino';
import type { RowDataPacket } from 'mysql2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LeaseKeeper } from '../../src/cluster/lease-keeper.js';
import { shardsFor } from '../../src/cluster/rendezvous.js';
import { SHARDS } from '../../src/cluster/shards.js';
import { Database } from '../../src/db/connection.js';
import { Lifecycle } from '../../src/lifecycle/lifecycle.js';
import { inBatchTransaction } from '../../src/dispatch/batch-try.js';
import type { ClaimFence } from '../../src/store/leases.js';
import { TaskStore } from '../../src/store/task-store.js';
import { systemClock } from '../../src/time/clock.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

const LEASE_MS = 1500;
const log = pino({ level: 'silent' });

let db: TestDatabase;
let database: Database;
let lifecycle: Lifecycle;
const keepers: LeaseKeeper[] = [];

function keeper(owner: string): LeaseKeeper {
  const made = new LeaseKeeper({ database, owner, leaseMs: LEASE_MS, log, onAcquire: async () => undefined, onLose: () => undefined });
  keepers.push(made);
  return made;
}

class RolledBack extends Error {}

/** The ids a claim of `ids` under `fence` locks, in a transaction rolled back after it: the task stays pending. */
async function claimed(ids: number[], fence: ClaimFence): Promise<number[]> {
  let locked: number[] = [];
  await inBatchTransaction(database, lifecycle, async (tx) => {
    locked = (await tx.claim(ids, Date.now(), fence)).map((task) => task.id);
    throw new RolledBack();
  }).catch((error: unknown) => {
    if (!(error instanceof RolledBack)) throw error;
  });
  return locked;
}

async function epochsIn(owner: string): Promise<Map<number, number>> {
  const rows = await db.query<({ shard: number; epoch: number } & RowDataPacket)[]>(
    'SELECT shard, epoch FROM punctual_shard_leases WHERE owner = ? AND lease_until > UTC_TIMESTAMP(3)',
    [owner],
  );
  return new Map(rows.map((row) => [Number(row.shard), Number(row.epoch)]));
}

beforeAll(async () => {
  db = await createTestDatabase('fencing');
  database = new Database({ url: db.url, poolSize: 4, lockWaitTimeoutS: 5 });
  const store = new TaskStore(database);
  lifecycle = new Lifecycle({
    store,
    clock: systemClock,
    retry: { baseMs: 1000, maxMs: 60_000 },
    effects: { apply: () => undefined },
  });
});

afterEach(async () => {
  await Promise.all(keepers.splice(0).map((k) => k.stop()));
  await db.execute('DELETE FROM punctual_shard_leases');
  await db.execute('DELETE FROM punctual_members');
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

describe('a shard lease epoch', () => {
  it('refuses a claim decided before the shard was lost, after the same process took it back', async () => {
    // A task in a shard that B takes from A while both are live.
    const shard = [...shardsFor('B', ['A', 'B'])][0]!;
    const id = shard + SHARDS * 1000;
    await db.execute("INSERT INTO punctual_tasks (id, type, payload, run_at) VALUES (?, 'tick', '{}', ?)", [
      id,
      new Date(Date.now() - 1000),
    ]);

    const a = keeper('A');
    await a.start();
    expect(a.owns(id)).toBe(true);
    const stale = a.fence([id]);
    const first = (await epochsIn('A')).get(shard)!;
    expect(stale).toEqual({ owner: 'A', epochs: [[shard, first]] });
    expect(await claimed([id], stale)).toEqual([id]);

    // B joins: A gives the shard up, B takes it (a new tenure).
    const b = keeper('B');
    await b.start();
    await waitFor(async () => b.ownedShards().includes(shard) || undefined, 10 * LEASE_MS, 'B to take the shard');
    expect((await epochsIn('B')).get(shard)).toBe(first + 1);
    expect(a.owns(id)).toBe(false);
    expect(await claimed([id], stale)).toEqual([]);

    // B leaves: A takes the shard back, a third tenure.
    await b.stop();
    await waitFor(async () => a.owns(id) || undefined, 10 * LEASE_MS, 'A to take the shard back');
    expect((await epochsIn('A')).get(shard)).toBe(first + 2);
    // A's memory would let the old decision through; the database does not.
    expect(a.mayClaim(id)).toBe(true);
    expect(await claimed([id], stale)).toEqual([]);
    expect(await claimed([id], a.fence([id]))).toEqual([id]);
  });

  it('is known to the keeper for every shard it holds, as the table has it', async () => {
    const a = keeper('A');
    await a.start();
    const all = Array.from({ length: SHARDS }, (_, shard) => shard);
    const fence = a.fence(all);
    expect(fence.epochs).toHaveLength(SHARDS);
    expect(new Map(fence.epochs)).toEqual(await epochsIn('A'));
  });
});
