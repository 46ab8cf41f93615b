/** GET /cluster: the processes sharing the tasks (SHARDING=on) and how many shards each holds. */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ClusterView } from '../../cluster/view.js';
import { ErrorJson } from '../schemas.js';

export interface ClusterRoutesOptions {
  read: () => Promise<ClusterView>;
}

const Member = Type.Object({
  id: Type.String({ description: 'the process: host, pid and a random tag' }),
  heartbeatAgeMs: Type.Integer({ description: 'how long ago its last heartbeat was written (database time)' }),
  live: Type.Boolean({ description: 'heartbeat within the lease: it takes part in the assignment' }),
  shards: Type.Integer({ description: 'shards it holds a valid lease on' }),
  self: Type.Boolean({ description: 'the process that answered' }),
});
export const ClusterJson = Type.Object({
  sharding: Type.Boolean({ description: 'SHARDING of the process that answered: off means every process arms every task' }),
  self: Type.String(),
  leaseMs: Type.Integer(),
  shards: Type.Integer({ description: 'the fixed number of shards (a task is in shard id MOD 256)' }),
  unowned: Type.Integer({ description: 'shards with no valid lease right now' }),
  members: Type.Array(Member),
});

export const clusterRoutes: FastifyPluginAsync<ClusterRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/cluster',
    {
      schema: {
        summary: 'The processes sharing the tasks and how many shards each holds',
        tags: ['operations'],
        response: { 200: ClusterJson, 401: ErrorJson },
      },
    },
    async () => options.read(),
  );
};
