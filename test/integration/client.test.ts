import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient, PunctualError } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'client-token-0123456789ab';
let db: TestDatabase;
let service: TestService;
let client: PunctualClient;
let baseUrl: string;

beforeAll(async () => {
  db = await createTestDatabase('client');
  service = await startTestService(
    db,
    { API_TOKEN: TOKEN, PORT: '0' },
    {
      boot: false,
      handlers: [
        testHandler('always_fails', async () => {
          throw new Error('nope');
        }),
      ],
    },
  );
  baseUrl = await service.start();
  client = new PunctualClient({ baseUrl, token: TOKEN });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('the TypeScript client', () => {
  it('creates, finds, moves, cancels and lists tasks', async () => {
    const order = { type: 'close_order', payload: { orderSn: 'SN1' }, delayMs: 3_600_000, key: 'close_order:SN1' };
    const first = await client.create(order);
    expect(first.created).toBe(true);
    expect(first.task).toMatchObject({ key: 'close_order:SN1', status: 'pending' });
    const again = await client.create(order);
    expect(again).toEqual({ created: false, task: first.task });

    const conflict = await client.create({ ...order, payload: { orderSn: 'SN2' } }).catch((error: unknown) => error);
    expect(conflict).toBeInstanceOf(PunctualError);
    expect(conflict).toMatchObject({ status: 409, code: 'PUNCTUAL_CONFLICT', task: { id: first.task.id } });

    expect((await client.get(first.task.id)).id).toBe(first.task.id);
    expect((await client.getByKey('close_order:SN1')).id).toBe(first.task.id);
    const moved = await client.reschedule(first.task.id, { runAt: '2026-12-24 20:00:00', timezone: 'Europe/Berlin' });
    expect(moved.runAtLocal).toBe('2026-12-24T20:00:00.000+01:00');

    for (let i = 0; i < 7; i++) await client.create({ type: 'close_order', payload: { orderSn: `P${i}` }, delayMs: 600_000 + i });
    const all = [];
    for await (const task of client.allPending({ pageSize: 3 })) all.push(task.id);
    expect(all).toHaveLength(8);
    expect((await client.pending({ limit: 2 })).tasks).toHaveLength(2);
    const pages = [];
    for await (const page of client.pendingPages({ pageSize: 3 })) pages.push(page.map((task) => task.id));
    expect(pages.map((page) => page.length)).toEqual([3, 3, 2]);
    expect(pages.flat()).toEqual(all);

    expect((await client.cancelByKey('close_order:SN1')).status).toBe('cancelled');
    const missing = await client.cancelByKey('close_order:none').catch((error: unknown) => error);
    expect(missing).toMatchObject({ status: 404, code: 'PUNCTUAL_NOT_FOUND' });
    expect((await client.recent('cancelled'))[0]!.id).toBe(first.task.id);
  });

  it('retries a failed task, reads the summary and readiness, and refuses without the token', async () => {
    const { task } = await client.create({ type: 'always_fails', payload: {}, delayMs: 0, maxAttempts: 1 });
    await waitFor(async () => (await client.get(task.id)).status === 'failed');
    expect(await client.retry(task.id, { delayMs: 60_000 })).toMatchObject({ status: 'pending', attempts: 0 });
    expect(await client.summary()).toMatchObject({ running: 0, armed: expect.any(Number) });
    expect(await client.ready()).toBe(true);
    expect(await client.role()).toBe('admin');
    expect(await client.healthy()).toBe(true);
    expect(await client.metrics()).toContain('punctual_armed_timers');
    const anonymous = new PunctualClient({ baseUrl });
    await expect(anonymous.summary()).rejects.toMatchObject({ status: 401, code: 'PUNCTUAL_UNAUTHORIZED' });
  });

  it('leaves an empty trace value out of a create', async () => {
    const sent: Record<string, string>[] = [];
    const recording: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      sent.push(
        Object.fromEntries(['traceparent', 'tracestate'].flatMap((name) => (headers.has(name) ? [[name, headers.get(name)!]] : []))),
      );
      return fetch(input, init);
    };
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const traced = new PunctualClient({
      baseUrl,
      token: TOKEN,
      fetch: recording,
      traceContext: () => ({ traceparent: '', tracestate: '' }),
    });
    await traced.create({ type: 'close_order', payload: { orderSn: 'SN-trace-empty' }, delayMs: 3_600_000 });
    await traced.createMany([{ type: 'close_order', payload: { orderSn: 'SN-trace-call' }, delayMs: 3_600_000 }], {
      traceContext: { traceparent, tracestate: '' },
    });
    expect(sent).toEqual([{}, { traceparent }]);
  });
});
