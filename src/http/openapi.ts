/**
 * The OpenAPI 3.1 document, generated from the same TypeBox schemas that validate requests and
 * serialize answers, at GET /openapi.json; a browsable copy at /docs. Both need no token.
 *
 * Generated when first asked for, not at boot: @fastify/swagger, @fastify/swagger-ui and the YAML
 * parser they load cost a start about 80 ms, for a page few processes ever serve. The app records
 * each route's method, URL and schema as it is added (an onRoute hook, nothing compiled); the
 * first request for the document or the page builds a Fastify instance of its own with the two
 * plugins and the recorded routes (their schemas, a handler that is never called, no validator
 * or serializer compiled), and answers from it from then on.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, HTTPMethods, RouteOptions } from 'fastify';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** Each task type with its payload's schema, read when the document is first asked for (after the boot). */
export type PayloadSchemas = () => [type: string, schema: unknown][];

/** What the document needs of a route. */
interface RecordedRoute {
  method: HTTPMethods[];
  url: string;
  schema: FastifySchema | undefined;
}

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
  // The `type` field names this service's types, the shop's own among them, not the built-in two.
  const properties = media.schema.properties as Record<string, Record<string, unknown>> | undefined;
  if (properties?.type !== undefined)
    properties.type = { ...properties.type, description: `a task type of this service: ${Object.keys(mapping).join(', ')}` };
  media.schema = {
    ...media.schema,
    oneOf: Object.values(mapping).map(($ref) => ({ $ref })),
    discriminator: { propertyName: 'type', mapping },
  };
  return { ...document, components };
}

/** The Fastify instance that writes the document and serves the page, built from `routes`. */
async function documentApp(routes: readonly RecordedRoute[], payloads?: PayloadSchemas): Promise<FastifyInstance> {
  const [{ default: Fastify }, { default: swagger }, { default: swaggerUi }] = await Promise.all([
    import('fastify'),
    import('@fastify/swagger'),
    import('@fastify/swagger-ui'),
  ]);
  const doc = Fastify({ logger: false });
  // The schemas are read, never run: nothing to compile.
  doc.setValidatorCompiler(() => () => true);
  doc.setSerializerCompiler(() => (data) => JSON.stringify(data));
  await doc.register(swagger, {
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
  await doc.register(swaggerUi, { routePrefix: '/docs' });
  const never = async () => undefined;
  for (const route of routes) doc.route({ method: route.method, url: route.url, schema: route.schema, handler: never });
  await doc.ready();
  return doc;
}

/** Headers of the document instance's answer that the app's own answer sets itself. */
const OWN_HEADERS = new Set(['content-length', 'connection', 'transfer-encoding', 'date', 'keep-alive']);

export function installOpenApi(app: FastifyInstance, payloads?: PayloadSchemas): void {
  const routes: RecordedRoute[] = [];
  app.addHook('onRoute', (route: RouteOptions) => {
    // HEAD routes are Fastify's own copies of the GET ones: the document's instance makes its own.
    const method = [route.method].flat().filter((name) => name !== 'HEAD');
    if (method.length > 0 && route.schema?.hide !== true) routes.push({ method, url: route.url, schema: route.schema });
  });
  let built: Promise<FastifyInstance> | undefined;
  const doc = () => {
    built ??= documentApp(routes, payloads).catch((error: unknown) => {
      built = undefined;
      throw error;
    });
    return built;
  };
  app.get('/openapi.json', { schema: { hide: true } }, async () => (await doc()).swagger());
  // The page and its files, answered by the document's own instance.
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const answer = await (await doc()).inject({ method: 'GET', url: request.url, headers: { accept: request.headers.accept ?? '*/*' } });
    void reply.code(answer.statusCode);
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined && !OWN_HEADERS.has(name)) void reply.header(name, value);
    }
    return answer.rawPayload.length === 0 ? reply.send() : reply.send(answer.rawPayload);
  };
  app.get('/docs', { schema: { hide: true } }, page);
  app.get('/docs/*', { schema: { hide: true } }, page);
}
