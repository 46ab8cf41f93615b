/**
 * The built service delivers to each kind of target: the queue clients are chunks of the bundle
 * of their own (lazy-*.js beside dist/app/main.js), loaded only when a target of their kind opens,
 * so a chunk that was not written, or one whose path does not resolve, would only show here, in
 * the process a shop runs. One publish task per kind, against the machine's real Redis, RabbitMQ
 * and NATS (a stream, an exchange and a JetStream stream of the test's own, removed afterwards).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import {
  addStream,
  bindQueue,
  deleteStream,
  drainQueue,
  removeExchange,
  removeStream,
  SHARED_AMQP,
  SHARED_NATS,
  SHARED_REDIS,
  streamEntries,
  streamMessages,
  suffix,
} from '../helpers/brokers.js';

const id = suffix();
const STREAM = `punctual-built-${id}`;
const EXCHANGE = `punctual-built-${id}`;
const QUEUE = `punctual-built-${id}`;
const JS_STREAM = `PUNCTUAL_BUILT_${id.toUpperCase()}`;
const SUBJECT = `punctual.built.${id}`;

let db: TestDatabase;
let server: ServerProcess;

beforeAll(async () => {
  db = await createTestDatabase('targets_built');
  await bindQueue(SHARED_AMQP, EXCHANGE, QUEUE, 'sale.start');
  await addStream(SHARED_NATS, JS_STREAM, [`${SUBJECT}.>`]);
  server = await startServer({
    env: {
      DATABASE_URL: db.url,
      TARGETS: [
        `orders=${SHARED_REDIS}#stream:${STREAM}`,
        `sale=${SHARED_AMQP}#exchange:${EXCHANGE}/sale.start`,
        `audit=${SHARED_NATS}#subject:${SUBJECT}.audit`,
      ].join(','),
    },
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await deleteStream(SHARED_REDIS, STREAM).catch(() => undefined);
  await removeExchange(SHARED_AMQP, EXCHANGE, QUEUE).catch(() => undefined);
  await removeStream(SHARED_NATS, JS_STREAM).catch(() => undefined);
  await db?.drop();
});

describe('the built service', () => {
  it('loads each queue client when its target opens and delivers one message to each', async () => {
    await waitFor(
      async () => {
        const ready = await server.request('GET', '/readyz');
        const targets = Object.values<{ up: boolean }>(ready.body.targets ?? {});
        return targets.length === 3 && targets.every((target) => target.up);
      },
      15_000,
      'every target connected',
    );
    const ids: number[] = [];
    for (const target of ['orders', 'sale', 'audit']) {
      const created = await server.request('POST', '/tasks', { type: 'publish', payload: { target, message: { target } }, delayMs: 0 });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      ids.push(created.body.id);
    }
    await waitFor(
      async () => Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM tasks WHERE status = 'done' AND id IN (?)", [ids]))[0].n) === 3,
      15_000,
      'the three published',
    );
    expect((await streamEntries(SHARED_REDIS, STREAM)).map((entry) => JSON.parse(entry.fields.body!))).toEqual([{ target: 'orders' }]);
    expect((await drainQueue(SHARED_AMQP, QUEUE)).map((message) => JSON.parse(message.body))).toEqual([{ target: 'sale' }]);
    expect((await streamMessages(SHARED_NATS, JS_STREAM)).map((message) => JSON.parse(message.data))).toEqual([{ target: 'audit' }]);
  }, 60_000);
});
