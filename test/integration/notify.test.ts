/**
 * NOTIFY_URL against MariaDB and a real receiver: a task that fails for good is told once, signed
 * like a webhook, and the notice is retried when the receiver fails; a task that fails and then
 * succeeds is not told; a failed notice tells nobody; a bad NOTIFY_URL stops the start.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const SECRET = 'notify-secret-0123456789';

let db: TestDatabase;
let service: TestService | undefined;
let receiver: Server;
let base: string;
const received: { headers: IncomingHttpHeaders; body: string }[] = [];
/** How the receiver answers, one a call, the last one repeating. */
let answers: ((res: ServerResponse) => void)[] = [];

const broken = testHandler('broken_for_good', async () => {
  throw new PermanentError('the order table is gone');
});
const flaky = testHandler('flaky_once', async ({ task }) => {
  if (task.attempts === 0) throw new Error('first try fails');
});

beforeAll(async () => {
  db = await createTestDatabase('notify');
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      const answer = answers.length > 1 ? answers.shift()! : (answers[0] ?? ((r: ServerResponse) => r.writeHead(200).end('ok')));
      answer(res);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  received.length = 0;
  answers = [];
});

afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
  await db?.drop();
});

async function start() {
  service = await startTestService(
    db,
    {
      WORKER_TYPES: 'pulled_for_good',
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      NOTIFY_URL: `${base}/punctual/failed`,
      RETRY_BASE_MS: '100',
      REFILL_INTERVAL_MS: '100',
    },
    { handlers: [broken, flaky] },
  );
}

async function create(type: string, key: string): Promise<number> {
  const answer = await service!.call('POST', '/tasks', { type, payload: {}, delayMs: 0, key });
  expect(answer.status).toBe(201);
  return answer.body.id as number;
}

describe('NOTIFY_URL', () => {
  it('tells a failure for good once, signed, and tries the notice again when the receiver fails', async () => {
    answers = [(res) => res.writeHead(503).end('busy'), (res) => res.writeHead(200).end('ok')];
    await start();
    const id = await create('broken_for_good', 'notify:1');
    await waitFor(async () => received.length >= 2, 20_000, 'the notice and its retry');
    const [first, second] = received;
    const body = JSON.parse(second!.body);
    expect(body).toMatchObject({
      event: 'task.failed',
      task: { id, key: 'notify:1', type: 'broken_for_good', attempts: 1, error: 'the order table is gone' },
    });
    // The same notice both times: one idempotency key, each call signed.
    expect(first!.headers['idempotency-key']).toBe(second!.headers['idempotency-key']);
    expect(String(second!.headers['x-punctual-signature'])).not.toBe('');
    expect(String(first!.headers['x-punctual-signature'])).not.toBe('');
    // The receiver answers before the notice is settled: wait for the settle, then read it.
    const notices = await waitFor(
      async () => {
        const rows = await db.query<any>("SELECT status, attempts FROM punctual_tasks WHERE task_key LIKE 'punctual:notify:%'");
        return rows.every((row: any) => row.status !== 'running' && row.status !== 'pending') ? rows : undefined;
      },
      10_000,
      'the notice to settle',
    );
    expect(notices).toEqual([{ status: 'done', attempts: 2 }]);
    // Counted as effects: exactly two calls, no third.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(received).toHaveLength(2);
  });

  it("tells a pull task's failure for good: its lease expired on its last attempt, or its worker's nack", async () => {
    await start();
    const lease = async () =>
      (await service!.call('POST', '/workers/lease', { types: ['pulled_for_good'], max: 1, leaseMs: 1000 })).body.tasks[0];
    const expiring = await service!.call('POST', '/tasks', { type: 'pulled_for_good', payload: {}, delayMs: 0, maxAttempts: 1 });
    expect((await lease()).id).toBe(expiring.body.id);
    // The worker died: its lease runs out, and the next lease request of the type recovers it.
    await waitFor(
      async () => {
        await lease();
        return (await service!.call('GET', `/tasks/${expiring.body.id}`)).body.status === 'failed';
      },
      10_000,
      'the expired lease to fail the task',
    );
    const nacked = await service!.call('POST', '/tasks', { type: 'pulled_for_good', payload: {}, delayMs: 0, maxAttempts: 3 });
    const leased = await waitFor(lease, 5000, 'the second lease');
    expect(leased.id).toBe(nacked.body.id);
    const answer = await service!.call('POST', `/tasks/${leased.id}/nack`, {
      leaseToken: leased.leaseToken,
      error: 'no such customer',
      permanent: true,
    });
    expect(answer.status).toBe(200);
    await waitFor(async () => received.length >= 2, 20_000, 'both notices');
    const told = received.map((call) => JSON.parse(call.body).task).sort((a, b) => a.id - b.id);
    expect(told).toMatchObject([
      { id: expiring.body.id, attempts: 1, error: 'lease expired on its last attempt' },
      { id: nacked.body.id, attempts: 1, error: 'no such customer' },
    ]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(received).toHaveLength(2);
  });

  it('tells nothing for a task that fails and then succeeds, and nothing about a notice that fails', async () => {
    answers = [(res) => res.writeHead(410).end('gone')]; // refused for good
    await start();
    const flakyId = await create('flaky_once', 'notify:2');
    await waitFor(async () => (await service!.call('GET', `/tasks/${flakyId}`)).body.status === 'done', 15_000, 'the flaky task');
    expect(received).toHaveLength(0);
    const id = await create('broken_for_good', 'notify:3');
    await waitFor(async () => received.length >= 1, 20_000, 'the notice');
    const notice = await waitFor(
      async () =>
        (await db.query<any>('SELECT id, status FROM punctual_tasks WHERE task_key LIKE ?', [`punctual:notify:failed:${id}:%`])).find(
          (row: any) => row.status === 'failed',
        ),
      20_000,
      'the notice to fail for good',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    // The notice failed for good: nobody is told about it.
    expect(await db.query<any>('SELECT id FROM punctual_tasks WHERE task_key LIKE ?', [`punctual:notify:failed:${notice.id}:%`])).toEqual(
      [],
    );
    expect(received).toHaveLength(1);
  });

  it('refuses a NOTIFY_URL that is not allowed or cannot be signed, in one line', () => {
    const env = { WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOWED_HOSTS: 'hooks.shop.example' };
    expect(() => loadConfig({ ...env, NOTIFY_URL: 'https://elsewhere.example/x' })).toThrow(/not in WEBHOOK_ALLOWED_HOSTS/);
    expect(() => loadConfig({ ...env, NOTIFY_URL: 'ftp://hooks.shop.example/x' })).toThrow(/http\(s\) URL/);
    expect(() => loadConfig({ WEBHOOK_ALLOWED_HOSTS: 'hooks.shop.example', NOTIFY_URL: 'https://hooks.shop.example/x' })).toThrow(
      /needs WEBHOOK_SECRET/,
    );
    expect(loadConfig({ ...env, NOTIFY_URL: 'https://hooks.shop.example/x' }).webhook.notifyUrl).toBe('https://hooks.shop.example/x');
  });
});
