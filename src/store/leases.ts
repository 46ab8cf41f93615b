/**
 * The shard leases and the members (SHARDING=on) in the database: the statements of
 * sql/shard-leases.ts and sql/members.ts, run for the lease keeper (src/cluster/) on its own
 * connection, for a claim on its transaction's (the fence), and for GET /cluster on the pool.
 * It decides nothing: which shards to want, take or give up is the lease keeper's.
 *
 * A fence is the (shard, epoch) pairs a process believed it held when it decided to claim: the
 * claim goes ahead only for the shards it still holds at that epoch (heldAt). A process that lost
 * a shard and took it back since holds it at a higher epoch, so a decision made before the loss
 * is refused, whatever its memory says.
 */
import type mysql from 'mysql2/promise';
import type { Connection, Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { MEMBERS } from './sql/members.js';
import { SHARD_LEASES } from './sql/shard-leases.js';

type Statements = Pick<mysql.Connection, 'query'>;

/** The shards, each at the epoch of its holder's tenure, that a claim was decided under. */
export interface ClaimFence {
  owner: string;
  epochs: readonly (readonly [shard: number, epoch: number])[];
  /** Ids claimed on their row's state alone, whatever their shard (tasks created in this process: timers/created-here.ts). */
  unfenced?: readonly number[];
}

async function arrays<T>(conn: Statements, sql: string, values: unknown[], timeout?: number): Promise<T[]> {
  const [rows] = await conn.query({ sql, values, rowsAsArray: true, ...(timeout === undefined ? {} : { timeout }) });
  return rows as T[];
}

/** The lease keeper's statements; each times out after `timeoutMs` (a stalled cluster must not hold a round). */
export class LeaseStore {
  constructor(private readonly timeoutMs: number) {}

  #run<T>(conn: Statements, sql: string, values: unknown[]): Promise<T[]> {
    return arrays<T>(conn, sql, values, this.timeoutMs);
  }

  /** A row for each of the `shards` shards (0 … shards − 1). */
  async seed(conn: Statements, shards: number): Promise<void> {
    await this.#run(conn, SHARD_LEASES.seed, [Array.from({ length: shards }, (_, shard) => [shard])]);
  }

  async forgetOldMembers(conn: Statements): Promise<void> {
    await this.#run(conn, MEMBERS.forgetOld, []);
  }

  async heartbeat(conn: Statements, owner: string): Promise<void> {
    await this.#run(conn, MEMBERS.heartbeat, [owner]);
  }

  /** Members whose heartbeat is within `leaseMs`. */
  async live(conn: Statements, leaseMs: number): Promise<string[]> {
    return (await this.#run<[string]>(conn, MEMBERS.live, [leaseMs * 1000])).map(([id]) => String(id));
  }

  /** Takes or renews `shards` for `owner` for `leaseMs`, where they are free, ran out, or are the owner's. */
  async take(conn: Statements, owner: string, shards: readonly number[], leaseMs: number): Promise<void> {
    if (shards.length > 0) await this.#run(conn, SHARD_LEASES.take, [owner, owner, leaseMs * 1000, shards, owner]);
  }

  /** The shards `owner` holds a valid lease of, each with the epoch of its tenure. */
  async held(conn: Statements, owner: string): Promise<Map<number, number>> {
    const rows = await this.#run<[number, number]>(conn, SHARD_LEASES.held, [owner]);
    return new Map(rows.map(([shard, epoch]) => [Number(shard), Number(epoch)]));
  }

  async release(conn: Statements, owner: string, shards: readonly number[]): Promise<void> {
    if (shards.length > 0) await this.#run(conn, SHARD_LEASES.release, [owner, shards]);
  }

  async releaseAll(conn: Statements, owner: string): Promise<void> {
    await this.#run(conn, SHARD_LEASES.releaseAll, [owner]);
  }

  async leave(conn: Statements, owner: string): Promise<void> {
    await this.#run(conn, MEMBERS.leave, [owner]);
  }
}

/** The shards of `fence` its owner still holds a valid lease of at the fence's epoch, read in the caller's transaction. */
export async function heldAt(conn: Connection, fence: ClaimFence): Promise<Set<number>> {
  if (fence.epochs.length === 0) return new Set();
  const rows = await arrays<[number]>(conn, SHARD_LEASES.heldAt, [fence.owner, fence.epochs]);
  return new Set(rows.map(([shard]) => Number(shard)));
}

export interface MemberRow {
  id: string;
  /** How long ago its heartbeat was written, by the database's clock. */
  heartbeatAgeMs: number;
  /** Shards it holds a valid lease of. */
  shards: number;
}

/** Every member, and how many shards have a valid lease: GET /cluster, read on the pool. */
export function readMembership(database: Database): Promise<{ members: MemberRow[]; owned: number }> {
  return autocommit(database, async (conn) => {
    const members = await arrays<[string, number, number]>(conn, MEMBERS.withShards, []);
    const [owned] = await arrays<[number]>(conn, SHARD_LEASES.countOwned, []);
    return {
      members: members.map(([id, age, shards]) => ({ id: String(id), heartbeatAgeMs: Number(age), shards: Number(shards) })),
      owned: Number(owned?.[0] ?? 0),
    };
  });
}
