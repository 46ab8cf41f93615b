/**
 * What GET /cluster and the dashboard show: the members and how many shards each holds, read
 * from the tables (so any process answers for the whole cluster), in database time.
 */
import type { Database } from '../db/connection.js';
import { readMembership } from '../store/leases.js';
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

export async function readCluster(database: Database, self: string, sharding: boolean, leaseMs: number): Promise<ClusterView> {
  const { members, owned } = await readMembership(database);
  return {
    sharding,
    self,
    leaseMs,
    shards: SHARDS,
    unowned: sharding ? SHARDS - owned : 0,
    members: members.map((member) => ({ ...member, live: member.heartbeatAgeMs < leaseMs, self: member.id === self })),
  };
}
