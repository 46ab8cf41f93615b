/**
 * Delivery targets when the broker goes away mid-run: a redis-server and a nats-server -js of the
 * test's own (own ports, own folders) killed with -9 and started again, and RabbitMQ (the shared
 * server, never restarted) reached through a TCP proxy the test cuts. None is lost: every task's
 * message is there at least once, a repeat only ever carries the same key, and JetStream keeps
 * exactly one message per task (its duplicate window dropped the repeats). The figures (repeats,
 * failed attempts, time to drain) are printed for docs/targets.md.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKey } from '../../src/handlers/webhook.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { Proxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import {
  addStream,
  bindQueue,
  drainQueue,
  OwnServer,
  removeExchange,
  SHARED_AMQP,
  streamEntries,
  streamMessages,
  suffix,
} from '../helpers/brokers.js';

const TASKS = 300;
/** The tasks fall due over this long: the fault lands in the middle of the run. */
const SPREAD_MS = 3000;

let db: TestDatabase;
let service: TestService | undefined;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await createTestDatabase('target_faults');
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

afterAll(async () => {
  await db?.drop();
});

async function start(targets: string): Promise<TestService> {
  service = await startTestService(db, { TARGETS: targets, RETRY_MAX_MS: '1000', REFILL_INTERVAL_MS: '100' });
  return service;
}

/** TASKS publish tasks to `target`, due over SPREAD_MS from now; answers id → key. */
async function spread(target: string): Promise<Map<number, string>> {
  const start = Date.now() + 300;
  const items = Array.from({ length: TASKS }, (_, n) => ({
    type: 'publish',
    payload: { target, message: { n } },
    runAt: start + Math.floor((n * SPREAD_MS) / TASKS),
    maxAttempts: 100,
  }));
  const answer = await service!.call('POST', '/tasks/batch', { tasks: items });
  expect(answer.status).toBe(200);
  const keys = new Map<number, string>();
  for (const item of answer.body.results as { id: number }[]) {
    const task = await service!.store.reads.get(item.id);
    keys.set(item.id, idempotencyKey(task!));
  }
  return keys;
}

async function counts(ids: number[]): Promise<{ done: number; attempts: number }> {
  const [row] = await db.query<any[]>("SELECT SUM(status = 'done') AS done, SUM(attempts) AS attempts FROM punctual_tasks WHERE id IN (?)", [ids]);
  return { done: Number(row.done), attempts: Number(row.attempts) };
}

/** Waits until `part` of the tasks are done, runs the fault, then waits until all are. */
async function faultMidRun(keys: Map<number, string>, fault: () => Promise<void>): Promise<{ attempts: number; ms: number }> {
  const ids = [...keys.keys()];
  const started = Date.now();
  await waitFor(async () => (await counts(ids)).done >= TASKS / 3, 20_000, 'a third published');
  await fault();
  await waitFor(async () => (await counts(ids)).done === TASKS, 60_000, 'every task published');
  return { attempts: (await counts(ids)).attempts, ms: Date.now() - started };
}

/** Every task's key at least once; every message's key is its task's; answers how many repeats. */
function checkDelivered(keys: Map<number, string>, delivered: { task?: number; key: string | undefined }[]): number {
  const expected = new Set(keys.values());
  const seen = new Set(delivered.map((message) => message.key));
  for (const key of expected) expect(seen.has(key), `message of ${key}`).toBe(true);
  for (const message of delivered) {
    expect(expected.has(message.key!)).toBe(true);
    if (message.task !== undefined) expect(keys.get(message.task)).toBe(message.key);
  }
  return delivered.length - expected.size;
}

/** The machine's RabbitMQ through a proxy of the test's own, a queue bound for the target, and the tasks spread to it. */
async function rabbitThroughProxy(): Promise<{ proxy: Proxy; queue: string; keys: Map<number, string> }> {
  const proxy = await new Proxy({ targetPort: 5672 }).start();
  cleanups.push(() => proxy.stop());
  const id = suffix();
  const [exchange, queue] = [`punctual-faults-${id}`, `punctual-faults-${id}`];
  await bindQueue(SHARED_AMQP, exchange, queue, 'k');
  cleanups.push(() => removeExchange(SHARED_AMQP, exchange, queue));
  await start(`own=amqp://guest:guest@127.0.0.1:${proxy.port}#exchange:${exchange}/k`);
  return { proxy, queue, keys: await spread('own') };
}

/** The queue's messages, checked against the tasks' keys; how many repeats. */
async function rabbitDelivered(queue: string, keys: Map<number, string>): Promise<{ messages: unknown[]; repeats: number }> {
  const messages = await drainQueue(SHARED_AMQP, queue);
  const repeats = checkDelivered(
    keys,
    messages.map((message) => ({ task: Number(message.headers['x-punctual-task']), key: message.messageId })),
  );
  return { messages, repeats };
}

describe('a broker that goes away mid-run loses nothing', () => {
  it('Redis killed -9 and started again', async () => {
    const redis = await OwnServer.start('redis');
    cleanups.push(() => redis.stop());
    const stream = `faults-${suffix()}`;
    await start(`own=${redis.url}#stream:${stream}`);
    const keys = await spread('own');
    const { attempts, ms } = await faultMidRun(keys, async () => {
      await redis.kill();
      await waitFor(async () => !service!.targets.health().own!.up, 5000, 'the target sees Redis gone');
      await redis.restart();
    });
    const entries = await streamEntries(redis.url, stream);
    const repeats = checkDelivered(
      keys,
      entries.map((entry) => ({ task: Number(entry.fields.task), key: entry.fields.key })),
    );
    console.log(
      `redis kill -9: ${TASKS} tasks, ${entries.length} entries (${repeats} repeats), ${attempts - TASKS} failed attempts, drained in ${ms} ms`,
    );
  });

  it('NATS JetStream killed -9 and started again: exactly one message per task in the stream', async () => {
    const nats = await OwnServer.start('nats');
    cleanups.push(() => nats.stop());
    const name = `FAULTS_${suffix().toUpperCase()}`;
    await addStream(nats.url, name, ['faults.>']);
    await start(`own=${nats.url}#subject:faults.audit`);
    const keys = await spread('own');
    const { attempts, ms } = await faultMidRun(keys, async () => {
      await nats.kill();
      await waitFor(async () => !service!.targets.health().own!.up, 5000, 'the target sees NATS gone');
      await nats.restart();
    });
    const stored = await streamMessages(nats.url, name);
    const repeats = checkDelivered(
      keys,
      stored.map((message) => ({ key: message.msgId })),
    );
    expect(repeats).toBe(0);
    console.log(
      `nats kill -9: ${TASKS} tasks, ${stored.length} messages in the stream (0 repeats kept), ${attempts - TASKS} failed attempts, drained in ${ms} ms`,
    );
  });

  it('RabbitMQ: the connection cut mid-run, twice, through a proxy', async () => {
    const { proxy, queue, keys } = await rabbitThroughProxy();
    const { attempts, ms } = await faultMidRun(keys, async () => {
      for (let cut = 0; cut < 2; cut++) {
        proxy.cutAll();
        await waitFor(async () => !service!.targets.health().own!.up, 5000, 'the target sees the cut');
        await waitFor(async () => service!.targets.health().own!.up, 15_000, 'the target reconnects');
      }
    });
    const { messages, repeats } = await rabbitDelivered(queue, keys);
    console.log(
      `amqp connection cut twice: ${TASKS} tasks, ${messages.length} messages (${repeats} repeats), ${attempts - TASKS} failed attempts, drained in ${ms} ms`,
    );
  });

  it('RabbitMQ refusing connections: punctual reconnects on its backoff, not once per publish', async () => {
    const { proxy, queue, keys } = await rabbitThroughProxy();
    let tries = 0;
    let failedAttempts = 0;
    const { ms } = await faultMidRun(keys, async () => {
      const ids = [...keys.keys()];
      const before = await counts(ids);
      const connectsBefore = proxy.accepted + proxy.refused;
      proxy.refuse(true);
      proxy.cutAll();
      // Down long enough for many publishes (100 due a second, retried within RETRY_MAX_MS) to fail.
      await waitFor(async () => (await counts(ids)).attempts - before.attempts >= 150, 20_000, 'publishes fail while refused');
      tries = proxy.accepted + proxy.refused - connectsBefore;
      failedAttempts = (await counts(ids)).attempts - before.attempts - ((await counts(ids)).done - before.done);
      proxy.refuse(false);
    });
    // 200 ms doubling with jitter: a handful of connects in the seconds down, never one per failed publish.
    expect(tries).toBeLessThanOrEqual(8);
    expect(failedAttempts).toBeGreaterThanOrEqual(100);
    const { messages, repeats } = await rabbitDelivered(queue, keys);
    console.log(
      `amqp refused: ${messages.length} messages (${repeats} repeats), ${failedAttempts} publishes failed against ${tries} connection attempts, drained in ${ms} ms`,
    );
  });
});
