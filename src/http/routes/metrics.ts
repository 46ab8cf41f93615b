/** GET /metrics: the Prometheus text format. */
import type { FastifyPluginAsync } from 'fastify';
import type { Metrics } from '../../observability/metrics.js';

export const metricsRoutes: FastifyPluginAsync<{ metrics: Metrics }> = async (app, { metrics }) => {
  app.get(
    '/metrics',
    { schema: { summary: 'Prometheus metrics, in the text format', tags: ['operations'], produces: ['text/plain'] } },
    async (_request, reply) => {
      reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    },
  );
};
