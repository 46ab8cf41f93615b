/**
 * GET /cluster: the processes sharing the tasks (SHARDING=on) and how many shards each holds,
 * read from the tables, so any process answers for the whole cluster.
 */
import { Type, type Static } from 'typebox';

export const ClusterMember = Type.Object({
  id: Type.String({ description: 'the process: host, pid and a random tag' }),
  heartbeatAgeMs: Type.Integer({ description: 'how long ago its last heartbeat was written (database time)' }),
  live: Type.Boolean({ description: 'heartbeat within the lease: it takes part in the assignment' }),
  shards: Type.Integer({ description: 'shards it holds a valid lease on' }),
  self: Type.Boolean({ description: 'the process that answered' }),
});
export type ClusterMember = Static<typeof ClusterMember>;

export const ClusterJson = Type.Object({
  sharding: Type.Boolean({ description: 'SHARDING of the process that answered: off means every process arms every task' }),
  self: Type.String(),
  leaseMs: Type.Integer(),
  shards: Type.Integer({ description: 'the fixed number of shards (a task is in shard id MOD 256)' }),
  unowned: Type.Integer({ description: 'shards with no valid lease right now' }),
  members: Type.Array(ClusterMember),
});
export type ClusterJson = Static<typeof ClusterJson>;
