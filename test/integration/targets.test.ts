/**
 * Delivery targets against the machine's real Redis, RabbitMQ and NATS (streams, exchanges,
 * queues and JetStream streams of the test's own, removed afterwards): every `publish` task's
 * message arrives with the task's idempotency key as its message id; JetStream drops a repeat of
 * a key; an unroutable AMQP message fails the attempt; a target name that is not configured, or a
 * broker address in a request, is a 400; /readyz and /metrics report each target; no credential
 * shows in a message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKey } from '../../src/handlers/webhook.js';
import { loadConfig } from '../../src/app/config.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { drainQueue, ownBrokerObjects, SHARED_AMQP, SHARED_NATS, SHARED_REDIS, streamEntries, streamMessages } from '../helpers/brokers.js';

const own = ownBrokerObjects('test');
const COUNT = 25;

let db: TestDatabase;
let service: TestService;

beforeAll(async () => {
  db = await createTestDatabase('targets');
  await own.create();
  service = await startTestService(db, {
    TARGETS: [
      `orders=${SHARED_REDIS}#stream:${own.stream}?maxlen=100000`,
      `sale=${SHARED_AMQP}#exchange:${own.exchange}/sale.start`,
      `nowhere=${SHARED_AMQP}#exchange:${own.exchange}/no.queue.bound`,
      `audit=${SHARED_NATS}#subject:${own.subject}.audit`,
    ].join(','),
  });
  await waitFor(async () => Object.values(service.targets.health()).every((health) => health.up), 10_000, 'every target connected');
});

afterAll(async () => {
  await service?.stop();
  await own.remove();
  await db?.drop();
});

/** Creates `count` publish tasks to `target`; answers their ids and idempotency keys. */
async function publishTasks(target: string, count: number, extra: object = {}): Promise<Map<number, string>> {
  const keys = new Map<number, string>();
  for (let n = 0; n < count; n++) {
    const created = await service.call('POST', '/tasks', {
      type: 'publish',
      payload: { target, message: { orderSn: `SN${n}`, n }, headers: { 'X-Shop': 'one' } },
      delayMs: 0,
      ...extra,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    keys.set(created.body.id, idempotencyKey({ id: created.body.id, createdAt: Date.parse(created.body.createdAt) }));
  }
  return keys;
}

async function allDone(ids: Iterable<number>, status = 'done'): Promise<boolean> {
  const list = [...ids];
  const [row] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = ?', [list, status]);
  return Number(row.n) === list.length;
}

describe('delivery targets', () => {
  it('Redis Streams: XADD with the key and attempt among the fields, one entry per task', async () => {
    const keys = await publishTasks('orders', COUNT);
    await waitFor(() => allDone(keys.keys()), 15_000, 'published');
    const entries = await streamEntries(SHARED_REDIS, own.stream);
    expect(entries).toHaveLength(COUNT);
    expect(new Set(entries.map((entry) => entry.fields.key))).toEqual(new Set(keys.values()));
    for (const entry of entries) {
      expect(entry.fields).toMatchObject({ attempt: '1', type: 'publish', 'h:X-Shop': 'one' });
      expect(keys.get(Number(entry.fields.task))).toBe(entry.fields.key);
      expect(JSON.parse(entry.fields.body!)).toMatchObject({ orderSn: expect.stringMatching(/^SN\d+$/) });
    }
  });

  it('RabbitMQ: persistent, confirmed, message_id = key; an unroutable message fails the attempt', async () => {
    const keys = await publishTasks('sale', COUNT);
    await waitFor(() => allDone(keys.keys()), 15_000, 'published');
    const messages = await drainQueue(SHARED_AMQP, own.queue);
    expect(messages).toHaveLength(COUNT);
    expect(new Set(messages.map((message) => message.messageId))).toEqual(new Set(keys.values()));
    expect(messages.every((message) => message.persistent && message.headers['X-Shop'] === 'one')).toBe(true);

    const lost = await publishTasks('nowhere', 1, { maxAttempts: 1 });
    await waitFor(() => allDone(lost.keys(), 'failed'), 15_000, 'failed');
    const [task] = await db.query<any[]>('SELECT last_error FROM punctual_tasks WHERE id = ?', [[...lost.keys()][0]]);
    expect(task.last_error).toContain('unroutable');
    expect(task.last_error).not.toContain('guest:guest');
  });

  it('RabbitMQ: one message with a header the broker acts on (CC) fails alone; the others on the shared channel go through', async () => {
    // Refused at create, whatever its case.
    for (const name of ['CC', 'bcc', 'x-delay', 'X-Death', 'x-first-death-queue', 'x-received-from']) {
      const answer = await service.call('POST', '/tasks', {
        type: 'publish',
        payload: { target: 'sale', message: {}, headers: { [name]: 'x' } },
        delayMs: 0,
      });
      expect(answer.status, name).toBe(400);
      expect(answer.body.message).toContain(`/headers may not set ${name}`);
    }
    // One written straight into the table (as before the check, or by a shop's own INSERT), due with 20 others.
    const { insertId: forged } = await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, max_attempts) VALUES ('publish', ?, UTC_TIMESTAMP(3) + INTERVAL 1 SECOND, 1)",
      [JSON.stringify({ target: 'sale', message: { forged: true }, headers: { CC: 'no-such-queue-anywhere' } })],
    );
    const keys = await publishTasks('sale', 20, { delayMs: 1000 });
    await waitFor(() => allDone(keys.keys()), 15_000, 'the 20 published');
    await waitFor(() => allDone([forged], 'failed'), 15_000, 'the forged one failed');
    const rows = await db.query<any[]>('SELECT id, attempts, last_error FROM punctual_tasks WHERE id IN (?)', [[...keys.keys(), forged]]);
    // Every other message on its first attempt: the channel was never closed under them.
    expect(rows.filter((row) => row.id !== forged).every((row) => row.attempts === 1 && row.last_error === null)).toBe(true);
    // Refused by the handler's check when claimed, before any broker sees it.
    expect(rows.find((row) => row.id === forged).last_error).toMatch(/may not set CC/);
    expect(await drainQueue(SHARED_AMQP, own.queue)).toHaveLength(20);
    // And the target itself never puts such a message on the shared channel: it fails alone, the others beside it are confirmed.
    const message = (n: number, headers: Record<string, string> = {}) => ({
      key: `k-cc-${n}`,
      attempt: 1,
      taskId: n,
      type: 'publish',
      body: '{}',
      headers,
    });
    const outcomes = await Promise.allSettled([
      service.targets.publish('sale', message(0, { CC: 'no-such-queue-anywhere' }), AbortSignal.timeout(5000)),
      ...Array.from({ length: 10 }, (_, n) => service.targets.publish('sale', message(n + 1), AbortSignal.timeout(5000))),
    ]);
    expect(outcomes[0]).toMatchObject({ status: 'rejected', reason: { message: expect.stringContaining('may not carry the header CC') } });
    expect(outcomes.slice(1).every((outcome) => outcome.status === 'fulfilled')).toBe(true);
    expect(await drainQueue(SHARED_AMQP, own.queue)).toHaveLength(10);
    expect(service.targets.health().sale).toMatchObject({ up: true });
  });

  it('NATS JetStream: Nats-Msg-Id = key, and a repeat of a key is dropped by the stream', async () => {
    const keys = await publishTasks('audit', COUNT);
    await waitFor(() => allDone(keys.keys()), 15_000, 'published');
    const stored = await streamMessages(SHARED_NATS, own.jsStream);
    expect(stored).toHaveLength(COUNT);
    expect(new Set(stored.map((message) => message.msgId))).toEqual(new Set(keys.values()));
    // A second attempt of the same task (the first's answer was lost) publishes the same id: dropped.
    const [taskId, key] = [...keys][0]!;
    const outcome = await service.targets.publish(
      'audit',
      { key, attempt: 2, taskId, type: 'publish', body: '{}', headers: {} },
      AbortSignal.timeout(5000),
    );
    expect(outcome).toMatch(/^duplicate of /);
    expect(await streamMessages(SHARED_NATS, own.jsStream)).toHaveLength(COUNT);
  });

  it('refuses a target that is not configured, and any broker address, with a 400 that creates nothing', async () => {
    const [before] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
    for (const payload of [
      { target: 'elsewhere', message: {} },
      { target: 'redis://evil.example.com:6379', message: {} },
      { target: 'orders', message: {}, url: 'redis://evil.example.com' },
      { target: 'orders', message: {}, headers: { 'Nats-Msg-Id': 'forged' } },
      { target: 'orders', message: {}, headers: { 'bad name': 'x' } },
    ]) {
      const answer = await service.call('POST', '/tasks', { type: 'publish', payload, delayMs: 0 });
      expect(answer.status, JSON.stringify(payload)).toBe(400);
      expect(answer.body.message).toMatch(/^body\/payload/);
    }
    const [after] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
    expect(after.n).toBe(before.n);
  });

  it('reports each target on /readyz and in /metrics, credentials masked everywhere', async () => {
    const ready = await service.call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.targets).toMatchObject({
      orders: { kind: 'redis', up: true },
      sale: { kind: 'amqp', up: true },
      audit: { kind: 'nats', up: true },
    });
    const metrics = (await service.app.inject({ url: '/metrics' })).body;
    expect(metrics).toMatch(/punctual_target_up\{target="orders",kind="redis"\} 1/);
    expect(metrics).toMatch(/punctual_target_publishes_total\{target="sale",outcome="ok"\} \d+/);
    expect(metrics).toMatch(/punctual_target_publishes_total\{target="nowhere",outcome="failed"\} 1/);
    const everything = JSON.stringify(service.logs) + JSON.stringify(ready.body) + metrics;
    expect(everything).not.toContain('guest:guest');
  });

  it('reads TARGETS strictly, with one line that names the entry and never its URL', () => {
    const bad = [
      ['orders=redis://u:secret-pass@h:6379', 'needs a destination'],
      ['orders=redis://u:secret-pass@h:6379#subject:x', 'its destination is #stream:'],
      ['orders=http://u:secret-pass@h#stream:x', 'redis://, amqp:// or nats://'],
      ['sale=amqp://u:secret-pass@h#exchange:shop', '<routing key>'],
      ['a=redis://h#stream:x,a=redis://h#stream:y', 'twice'],
      ['orders=redis://u:secret-pass@h#stream:x?maxlen=-1', 'unknown option'],
    ];
    for (const [value, says] of bad) {
      let message = '';
      try {
        loadConfig({ TARGETS: value });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, value).toContain(says);
      expect(message).not.toContain('secret-pass');
    }
    expect(loadConfig({ TARGETS: 'x=amqp://h/%2F#exchange:/q' }).targets.list).toEqual([
      { name: 'x', kind: 'amqp', url: 'amqp://h/%2F', destination: '', routingKey: 'q' },
    ]);
  });
});
