/**
 * Traces from a shop's request to its task's effect, against the built server as a process: an
 * OTLP/HTTP receiver (helpers/otlp.ts) collects the spans the standard variables send it to, a
 * webhook receiver and a Redis stream show what goes out.
 * - create → run → webhook: one trace, the caller's; the run's span a child of the create's
 *   server span, the call a client span of the run's, and the receiver's traceparent that call's;
 * - a batch, a broker message's headers, a pull worker's lease through the TS client's loop;
 * - a restart between the create and the run;
 * - a malformed traceparent: ignored, the create goes through;
 * - with no exporter: the webhook still gets the caller's trace, under a span id of its own.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { OtlpReceiver } from '../helpers/otlp.js';
import { killLeftoverServers, startServer, waitFor, type ServerProcess } from '../helpers/server.js';

const SECRET = 'tracing-test-webhook-secret';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE}-${CALLER_SPAN}-01`;
const STREAM = `punctual:test:tracing:${process.pid}`;

let db: TestDatabase;
let otlp: OtlpReceiver;
let receiver: Server;
let receiverUrl: string;
const calls: { path: string; headers: IncomingHttpHeaders }[] = [];
const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: true });

beforeAll(async () => {
  db = await createTestDatabase('tracing');
  otlp = await new OtlpReceiver().start();
  receiver = createServer((req, res) => {
    calls.push({ path: req.url ?? '', headers: req.headers });
    req.resume();
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  await redis.connect();
});

afterAll(async () => {
  killLeftoverServers();
  await redis.del(STREAM).catch(() => undefined);
  redis.disconnect();
  receiver?.closeAllConnections();
  await new Promise((resolve) => receiver?.close(resolve));
  await otlp?.stop();
  await db?.drop();
});

function env(exporting: boolean): Record<string, string> {
  return {
    DATABASE_URL: db.url,
    WEBHOOK_SECRET: SECRET,
    WEBHOOK_ALLOWED_HOSTS: new URL(receiverUrl).host,
    WORKER_TYPES: 'traced_work',
    TARGETS: `events=redis://127.0.0.1:6379#stream:${STREAM}`,
    ...(exporting ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'punctual-test', OTEL_BSP_SCHEDULE_DELAY: '50' } : {}),
  };
}

async function create(server: ServerProcess, body: unknown, traceparent = TRACEPARENT): Promise<number> {
  const answer = await server.request('POST', '/tasks', body, { traceparent, tracestate: 'shop=checkout' });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id as number;
}

const callTo = (path: string) => waitFor(async () => calls.find((call) => call.path === path), 15_000, `the call to ${path}`);
const spanNamed = (name: string, where: (span: (typeof otlp.spans)[number]) => boolean = () => true) =>
  waitFor(async () => otlp.spans.find((span) => span.name === name && where(span)), 15_000, `the span ${name}`);

describe('a trace from the create to the effect', () => {
  it('create → run → webhook: one trace, each span the child of the one before, the receiver told the call’s', async () => {
    const server = await startServer({ env: env(true) });
    try {
      const id = await create(server, { type: 'webhook', payload: { url: `${receiverUrl}/chain`, body: { n: 1 } }, delayMs: 0 });
      const call = await callTo('/chain');
      const [, traceId, spanId] = String(call.headers.traceparent).split('-');
      expect(traceId).toBe(TRACE);
      expect(call.headers.tracestate).toBe('shop=checkout');
      const created = await spanNamed('POST /tasks', (span) => span.traceId === TRACE);
      const run = await spanNamed('process webhook', (span) => span.attributes['punctual.task.id'] === id);
      const client = await spanNamed('POST', (span) => span.spanId === spanId);
      expect(created).toMatchObject({ service: 'punctual-test', kind: 2, parentSpanId: CALLER_SPAN, attributes: { 'punctual.task.id': id } });
      expect(run).toMatchObject({ traceId: TRACE, kind: 5, parentSpanId: created.spanId });
      expect(run.attributes).toMatchObject({ 'punctual.task.type': 'webhook', 'punctual.attempt': 1, 'punctual.outcome': 'done' });
      expect(typeof run.attributes['punctual.lateness_ms']).toBe('number');
      expect(run.attributes['messaging.destination.name']).toBe('webhook');
      expect(client).toMatchObject({ traceId: TRACE, kind: 3, parentSpanId: run.spanId, attributes: { 'http.response.status_code': 200 } });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('a batch, a broker message and a pull worker’s lease carry the caller’s trace on', async () => {
    const server = await startServer({ env: env(true) });
    try {
      const batch = await server.request(
        'POST',
        '/tasks/batch',
        {
          tasks: [
            { type: 'webhook', payload: { url: `${receiverUrl}/batch/1` }, delayMs: 0 },
            { type: 'webhook', payload: { url: `${receiverUrl}/batch/2` }, delayMs: 0 },
          ],
        },
        { traceparent: TRACEPARENT },
      );
      expect(batch.body.created).toBe(2);
      for (const path of ['/batch/1', '/batch/2']) expect(String((await callTo(path)).headers.traceparent).split('-')[1]).toBe(TRACE);
      expect(await spanNamed('POST /tasks/batch', (span) => span.traceId === TRACE)).toMatchObject({ parentSpanId: CALLER_SPAN });

      await create(server, { type: 'publish', payload: { target: 'events', message: { order: 'SN1' } }, delayMs: 0 });
      const entry = await waitFor(async () => (await redis.xrange(STREAM, '-', '+'))[0], 15_000, 'the stream entry');
      const fields = entry[1];
      const traceparent = fields[fields.indexOf('h:traceparent') + 1]!;
      expect(traceparent.split('-')[1]).toBe(TRACE);
      const producer = await spanNamed('send events', (span) => span.traceId === TRACE);
      expect(producer.kind).toBe(4);
      expect(traceparent.split('-')[2]).toBe(producer.spanId);

      const workId = await create(server, { type: 'traced_work', payload: { n: 1 }, delayMs: 0 });
      const client = new PunctualClient({ baseUrl: server.baseUrl });
      const stop = new AbortController();
      let continued: string | null = null;
      await client.work(
        ['traced_work'],
        (task) => {
          continued = task.traceparent;
          stop.abort();
        },
        { signal: stop.signal },
      );
      expect(String(continued).split('-')[1]).toBe(TRACE);
      const lease = await spanNamed('process traced_work', (span) => span.attributes['punctual.task.id'] === workId);
      expect(String(continued).split('-')[2]).toBe(lease.spanId);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('keeps the trace across a restart between the create and the run', async () => {
    let server = await startServer({ env: env(true) });
    const id = await create(server, { type: 'webhook', payload: { url: `${receiverUrl}/restart` }, delayMs: 2500 });
    expect(await server.stop()).toBe(0);
    server = await startServer({ env: env(true) });
    try {
      expect(String((await callTo('/restart')).headers.traceparent).split('-')[1]).toBe(TRACE);
      expect(await spanNamed('process webhook', (span) => span.attributes['punctual.task.id'] === id)).toMatchObject({ traceId: TRACE });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('ignores a malformed traceparent: the create goes through and runs', async () => {
    const server = await startServer({ env: env(true) });
    try {
      for (const malformed of ['garbage', `00-${'0'.repeat(32)}-${CALLER_SPAN}-01`, `00-${TRACE}-${CALLER_SPAN}`, `${TRACEPARENT}${'x'.repeat(200)}`]) {
        const id = await create(server, { type: 'webhook', payload: { url: `${receiverUrl}/malformed` }, delayMs: 0 }, malformed);
        const [row] = await db.query<any[]>('SELECT trace_parent FROM punctual_tasks WHERE id = ?', [id]);
        expect(String(row.trace_parent)).not.toContain(CALLER_SPAN);
      }
      await waitFor(async () => calls.filter((call) => call.path === '/malformed').length === 4, 15_000, 'the four calls');
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('with no exporter, a webhook still gets the caller’s trace, under a span id that is not the caller’s', async () => {
    const server = await startServer({ env: env(false) });
    try {
      const before = otlp.spans.length;
      await create(server, { type: 'webhook', payload: { url: `${receiverUrl}/unexported` }, delayMs: 0 });
      const [, traceId, spanId, flags] = String((await callTo('/unexported')).headers.traceparent).split('-');
      expect(traceId).toBe(TRACE);
      expect(spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(spanId).not.toBe(CALLER_SPAN);
      expect(flags).toBe('01');
      expect(otlp.spans.length).toBe(before);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});
