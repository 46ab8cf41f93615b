/**
 * The OpenAPI 3.1 document, generated from the same TypeBox schemas that validate requests and
 * serialize answers, at GET /openapi.json; a browsable copy at /docs. Both need no token.
 */
import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** Each task type with its payload's schema, read when the document is first asked for (after the boot). */
export type PayloadSchemas = () => [type: string, schema: unknown][];

/**
 * The create's body as a union discriminated by `type`: one component per task type with its
 * payload schema, the built-in ones and the shop's own (modules, procedures) alike.
 */
function withTypeUnion<D extends { paths?: object; components?: object }>(document: D, payloads: PayloadSchemas): D {
  type Media = { schema?: Record<string, unknown> };
  const paths = document.paths as Record<string, { post?: { requestBody?: { content?: Record<string, Media> } } }> | undefined;
  const media = paths?.['/tasks']?.post?.requestBody?.content?.['application/json'];
  if (media?.schema === undefined) return document;
  const components = (document.components ?? {}) as { schemas?: Record<string, unknown> };
  const schemas = (components.schemas ??= {});
  const mapping: Record<string, string> = {};
  for (const [type, payload] of payloads()) {
    const name = `CreateTask.${type}`;
    schemas[name] = {
      type: 'object',
      description: `a ${type} task`,
      properties: { type: { const: type }, payload: JSON.parse(JSON.stringify(payload)) as unknown },
      required: ['type'],
    };
    mapping[type] = `#/components/schemas/${name}`;
  }
  media.schema = {
    ...media.schema,
    oneOf: Object.values(mapping).map(($ref) => ({ $ref })),
    discriminator: { propertyName: 'type', mapping },
  };
  return { ...document, components };
}

export function installOpenApi(app: FastifyInstance, payloads?: PayloadSchemas): void {
  void app.register(swagger, {
    ...(payloads === undefined
      ? {}
      : {
          transformObject: (documents) =>
            'openapiObject' in documents ? withTypeUnion(documents.openapiObject, payloads) : documents.swaggerObject,
        }),
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
