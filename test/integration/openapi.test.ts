import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService;
let document: any;

/** Every route of the API, as OpenAPI writes it. */
const ROUTES = [
  ['post', '/tasks'],
  ['get', '/tasks/pending'],
  ['get', '/tasks/recent'],
  ['get', '/tasks/summary'],
  ['get', '/tasks/{id}'],
  ['post', '/tasks/{id}/cancel'],
  ['post', '/tasks/{id}/reschedule'],
  ['post', '/tasks/{id}/retry'],
  ['get', '/tasks/by-key/{key}'],
  ['post', '/tasks/by-key/{key}/cancel'],
  ['get', '/healthz'],
  ['get', '/readyz'],
  ['get', '/metrics'],
  ['get', '/types'],
  ['put', '/types/{type}/limits'],
  ['post', '/types/{type}/pause'],
  ['post', '/types/{type}/resume'],
] as const;

beforeAll(async () => {
  db = await createTestDatabase('openapi');
  service = await startTestService(db, { API_TOKEN: 'openapi-token-0123456789' });
  const answer = await service.app.inject({ url: '/openapi.json' });
  expect(answer.statusCode).toBe(200); // no token needed
  document = answer.json();
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
    expect(document.components.securitySchemes.bearer).toEqual({ type: 'http', scheme: 'bearer' });
  });

  it.each(ROUTES)('describes %s %s with a summary and its answers', (method, path) => {
    const operation = document.paths[path]?.[method];
    expect(operation, `${method} ${path}`).toBeDefined();
    expect(operation.summary.length).toBeGreaterThan(5);
    expect(Object.keys(operation.responses ?? {}).length).toBeGreaterThan(0);
  });

  it('gives the create its body, its answers and examples', () => {
    const create = document.paths['/tasks'].post;
    const media = create.requestBody.content['application/json'];
    expect(media.schema.required).toEqual(['type']);
    expect(Object.keys(media.schema.properties)).toEqual([
      'type',
      'payload',
      'runAt',
      'delayMs',
      'timezone',
      'key',
      'maxAttempts',
      'misfire',
      'cron',
      'tags',
      'priority',
      'onKeyConflict',
      'expireAfterMs',
      'group',
      'spreadMs',
      'maxDelayMs',
    ]);
    expect(Object.values(media.examples).map((example: any) => example.value.type)).toEqual(['close_order', 'webhook', 'webhook']);
    expect(Object.keys(create.responses).sort()).toEqual(['200', '201', '400', '401', '409']);
    expect(create.responses['201'].content['application/json'].example).toMatchObject({ runAtLocal: '2026-12-01T10:00:00.000+08:00' });
  });

  it('leaves the probes open and asks for the token everywhere else', () => {
    expect(document.security).toEqual([{ bearer: [] }]);
    expect(document.paths['/healthz'].get.security).toEqual([]);
    expect(document.paths['/readyz'].get.security).toEqual([]);
  });

  it('has a page to browse it at /docs', async () => {
    const page = await service.app.inject({ url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toContain('swagger');
    // Its files come through the document's own instance (built at the first ask).
    const css = await service.app.inject({ url: '/docs/static/swagger-ui.css' });
    expect(css.statusCode).toBe(200);
    expect(css.headers['content-type']).toContain('text/css');
    expect(css.body.length).toBeGreaterThan(10_000);
    expect((await service.app.inject({ url: '/docs/no-such-file.js' })).statusCode).toBe(404);
  });
});
