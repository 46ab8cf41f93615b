/**
 * What GET /cluster and the dashboard show: the members and how many shards each holds, read
 * from the tables (so any process answers for the whole cluster), in database time.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { SHARDS } from './shards.js';

export interface ClusterMember {
  id: string;
  /** How long ago its last heartbeat was written, by the database's clock. */
  heartbeatAgeMs: number;
  /** Heartbeat within the lease: it counts in the assignment. */
  live: boolean;
  /** Shards it holds a lease on now. */
  shards: number;
  /** This process. */
  self: boolean;
}

export interface ClusterView {
  sharding: boolean;
  self: string;
  leaseMs: number;
  shards: number;
  /** Shards with no valid lease right now (moments during a handover or a failover). */
  unowned: number;
  members: ClusterMember[];
}

const MEMBERS = `SELECT m.id, TIMESTAMPDIFF(MICROSECOND, m.heartbeat_at, UTC_TIMESTAMP(3)) DIV 1000,
    (SELECT COUNT(*) FROM shard_leases s WHERE s.owner = m.id AND s.lease_until > UTC_TIMESTAMP(3))
  FROM members m ORDER BY m.id`;
const OWNED = 'SELECT COUNT(*) FROM shard_leases WHERE owner IS NOT NULL AND lease_until > UTC_TIMESTAMP(3)';

export async function readCluster(database: Database, self: string, sharding: boolean, leaseMs: number): Promise<ClusterView> {
  return database.withConnection(async (conn) => {
    const [members] = (await conn.query<mysql.RowDataPacket[]>({ sql: MEMBERS, rowsAsArray: true })) as unknown as [
      [string, number, number][],
    ];
    const [owned] = (await conn.query<mysql.RowDataPacket[]>({ sql: OWNED, rowsAsArray: true })) as unknown as [[number][]];
    return {
      sharding,
      self,
      leaseMs,
      shards: SHARDS,
      unowned: sharding ? SHARDS - Number(owned[0]?.[0] ?? 0) : 0,
      members: members.map(([id, age, shards]) => ({
        id: String(id),
        heartbeatAgeMs: Number(age),
        live: Number(age) < leaseMs,
        shards: Number(shards),
        self: id === self,
      })),
    };
  });
}
