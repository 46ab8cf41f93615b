/**
 * The OpenAPI 3.1 document, generated from the same TypeBox schemas that validate requests and
 * serialize answers, at GET /openapi.json; a browsable copy at /docs. Both need no token.
 */
import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

export function installOpenApi(app: FastifyInstance): void {
  void app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'punctual',
        version,
        description:
          'One-shot timers for shops: "run task T at time X", on time and exactly once, kept in MySQL. ' +
          'Every route but the probes and this document needs `Authorization: Bearer <API_TOKEN>` when API_TOKEN is set.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
      tags: [
        { name: 'tasks', description: 'Schedule, read, cancel, move and retry tasks' },
        { name: 'types', description: 'Pause task types and limit their runs' },
        { name: 'bulk', description: 'Cancel or move many pending tasks at once by tag, key prefix or type (admin role)' },
        { name: 'operations', description: 'Probes and metrics' },
      ],
    },
  });
  void app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
