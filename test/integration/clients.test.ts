/**
 * Every route of the OpenAPI document meant for programs has a call in the TypeScript client
 * (clients/ts/src/client.ts) and, but for the dashboard's chart data, in the PHP client
 * (clients/php/src/Client.php): a route added to the API without a client call fails here.
 *
 * The TypeScript client is held to it by calling: each public method runs once against a real
 * app, through a fetch that records the requests, and the routes they reached must be the
 * document's. A method missing from CALLS fails too, so a new method is called here as well. The
 * PHP client's routes are read from its source, where each call names its method and path.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient, PunctualError, type LeasedTask } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

/**
 * Routes that are for people or tools, not for a client library: the document, its pages, the
 * dashboard's files, and the event stream (read with an EventSource or any SSE reader, not a call
 * and its answer).
 */
const NOT_FOR_CLIENTS = /^\/(openapi\.json|docs|ui|favicon\.ico|events)?(\/|$)/;
/** The dashboard's chart data: the TypeScript client reads it too (a tool may draw its own), the PHP client does not. */
const CHARTS = /^(GET|POST) \/charts\//;

let db: TestDatabase;
let service: TestService;
let documented: string[];
let baseUrl: string;

beforeAll(async () => {
  db = await createTestDatabase('clients');
  service = await startTestService(
    db,
    { PORT: '0', WORKER_TYPES: 'clients_job' },
    {
      handlers: [
        testHandler('always_fails', async () => {
          throw new Error('nope');
        }),
      ],
    },
  );
  baseUrl = await service.start();
  const paths: Record<string, Record<string, unknown>> = (await service.app.inject({ url: '/openapi.json' })).json().paths;
  documented = Object.entries(paths)
    .filter(([path]) => !NOT_FOR_CLIENTS.test(path))
    .flatMap(([path, operations]) =>
      Object.keys(operations)
        .filter((method) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .map((method) => `${method.toUpperCase()} ${path.replace(/\{[^}]+\}/g, '{}')}`),
    )
    .sort();
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

/**
 * The documented route a request reached, as "METHOD /tasks/{}/cancel": of the templates its path
 * fits, the one with the fewest parameters (a static segment wins, /tasks/pending over /tasks/{}),
 * as Fastify's router picks it.
 */
function routeOf(method: string, pathname: string): string | undefined {
  const fits = documented.filter((route) => {
    const [routeMethod, template] = route.split(' ') as [string, string];
    return routeMethod === method && new RegExp(`^${template.replace(/\{\}/g, '[^/]+')}$`).test(pathname);
  });
  return fits.sort((a, b) => a.split('{}').length - b.split('{}').length)[0];
}

async function drain<T>(items: AsyncIterable<T>): Promise<number> {
  let count = 0;
  for await (const _ of items) count++;
  return count;
}

/** One call of every public method of the client, in an order that gives each a task to work on. */
function calls(client: PunctualClient): Record<string, () => Promise<unknown>> {
  let id = 0;
  let failed = 0;
  let leased: LeasedTask | undefined;
  const order = (sn: string) => ({
    type: 'close_order',
    payload: { orderSn: sn },
    delayMs: 3_600_000,
    key: `clients:${sn}`,
    tags: ['shop:1'],
  });
  return {
    create: async () => (id = (await client.create(order('A'))).task.id),
    createMany: () => client.createMany([order('B'), order('C')]),
    get: () => client.get(id),
    getByKey: () => client.getByKey('clients:A'),
    reschedule: () => client.reschedule(id, { delayMs: 7_200_000 }),
    editPayload: () => client.editPayload(id, { orderSn: 'A2' }),
    cancel: () => client.cancel(id),
    delete: () => client.delete(id),
    cancelByKey: () => client.cancelByKey('clients:B'),
    retry: async () => {
      failed = (await client.create({ type: 'always_fails', payload: {}, delayMs: 0, maxAttempts: 1 })).task.id;
      await waitFor(async () => (await client.get(failed)).status === 'failed');
      return client.retry(failed, { delayMs: 3_600_000 });
    },
    runs: () => client.runs(failed, { limit: 10 }),
    search: () => client.search('clients:B', { limit: 5 }),
    // Nothing is running here: the route answers 409, it is there.
    releaseLease: () => client.releaseLease(id),
    audit: () => client.audit({ action: 'retry', limit: 5 }),
    pending: () => client.pending({ tag: 'shop:1', limit: 10 }),
    allPending: () => drain(client.allPending({ pageSize: 1 })),
    pendingPages: () => drain(client.pendingPages({ pageSize: 1 })),
    recent: () => client.recent('cancelled'),
    summary: () => client.summary(),
    bulkReschedule: () => client.bulkReschedule({ tag: 'shop:1', shiftMs: 60_000, requestId: 'clients-test' }),
    bulkCancel: () => client.bulkCancel({ tag: 'shop:1' }),
    bulkRetry: () => client.bulkRetry({ tag: 'shop:1' }),
    bulkDelete: () => client.bulkDelete({ tag: 'shop:1', status: 'cancelled' }),
    lastHour: () => client.lastHour(),
    // The service here is on the real clock: the three answer 404 PUNCTUAL_TEST_CLOCK_OFF, the routes are there.
    clock: () => client.clock(),
    advance: () => client.advance(60_000),
    setTime: () => client.setTime(Date.now() + 60_000),
    workers: () => client.workers(),
    list: () => client.list({ status: 'cancelled', tag: 'shop:1', limit: 10, offset: 0 }),
    counts: () => client.counts({ tag: 'shop:1' }),
    types: () => client.types(),
    setLimits: () => client.setLimits('close_order', { maxConcurrency: 4 }),
    pause: () => client.pause('close_order'),
    resume: () => client.resume('close_order'),
    role: () => client.role(),
    ready: () => client.ready(),
    healthy: () => client.healthy(),
    cluster: () => client.cluster(),
    upcomingLoad: () => client.upcomingLoad(),
    recentRuns: () => client.recentRuns(),
    metrics: () => client.metrics(),
    lease: async () => {
      await client.create({ type: 'clients_job', payload: { n: 1 }, delayMs: 0 });
      leased = (await client.lease({ types: ['clients_job'], waitMs: 5000 }))[0];
      return leased;
    },
    extend: () => client.extend(leased!, 10_000),
    nack: () => client.nack(leased!, 'not yet', { retryAt: Date.now() }),
    ack: async () => {
      const [again] = await client.lease({ types: ['clients_job'], waitMs: 5000 });
      return client.ack(again!);
    },
    ackAll: async () => {
      await client.create({ type: 'clients_job', payload: { n: 3 }, delayMs: 0 });
      const tasks = await client.lease({ types: ['clients_job'], waitMs: 5000 });
      return client.ackAll(tasks);
    },
    work: async () => {
      await client.create({ type: 'clients_job', payload: { n: 2 }, delayMs: 0 });
      const stop = new AbortController();
      await client.work(['clients_job'], () => stop.abort(), { signal: stop.signal, waitMs: 5000 });
    },
  };
}

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** `$this->call('POST', '/tasks/by-key/' . rawurlencode($key) . '/cancel')` → "POST /tasks/by-key/{}/cancel". */
function phpRoutes(source: string): string[] {
  return [...source.matchAll(/\$this->call\('(\w+)', ((?:\s*\.\s*|'[^']*'|"[^"]*"|rawurlencode\(\$\w+\))+)/g)].map(
    ([, method, expression]) => {
      const path = expression!
        .replace(/rawurlencode\(\$\w+\)/g, '{}')
        .replace(/\s*\.\s*/g, '')
        .replace(/['"]/g, '')
        .replace(/\{\$query\}|\?.*$/g, '')
        .replace(/\{\$\w+\}/g, '{}');
      return `${method} ${path}`;
    },
  );
}

describe('the clients', () => {
  it('the TypeScript client reaches every route of the API meant for programs, each public method once', async () => {
    const requests: string[] = [];
    const recording: typeof fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      requests.push(`${init?.method ?? 'GET'} ${url.pathname}`);
      return fetch(input, init);
    };
    const client = new PunctualClient({ baseUrl, fetch: recording });
    const table = calls(client);
    const methods = Object.getOwnPropertyNames(PunctualClient.prototype).filter((name) => name !== 'constructor');
    expect(Object.keys(table).sort()).toEqual(methods.sort());

    for (const [name, call] of Object.entries(table)) {
      // A refusal of the API's own (a 409 for a task in the wrong state) still shows the route is there.
      const error = await call().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      if (error !== undefined) {
        expect(error, name).toBeInstanceOf(PunctualError);
        expect((error as PunctualError).code, `${name}: ${(error as Error).message}`).toMatch(/^PUNCTUAL_/);
      }
    }
    const reached = requests.map((request) => routeOf(...(request.split(' ') as [string, string])) ?? `not documented: ${request}`);
    expect(documented.length).toBeGreaterThan(20);
    expect([...new Set(reached)].sort()).toEqual(documented);
  });

  it('the PHP client calls the same routes, but for the charts', () => {
    const php = [...new Set(phpRoutes(read('clients/php/src/Client.php')))].sort();
    expect(php.length).toBeGreaterThan(10);
    expect(php).toEqual(documented.filter((route) => !CHARTS.test(route)));
  });
});
