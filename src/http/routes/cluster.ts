/** GET /cluster: the processes sharing the tasks (SHARDING=on) and how many shards each holds. */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ClusterJson } from '../../contract/cluster.js';
import { ErrorJson } from '../../contract/errors.js';

export interface ClusterRoutesOptions {
  /** What the cluster view reads; typed by the contract, so the two cannot drift apart. */
  read: () => Promise<ClusterJson>;
}

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
