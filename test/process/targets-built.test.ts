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
import { drainQueue, ownBrokerObjects, SHARED_AMQP, SHARED_NATS, SHARED_REDIS, streamEntries, streamMessages } from '../helpers/brokers.js';

const own = ownBrokerObjects('built');

let db: TestDatabase;
let server: ServerProcess;

beforeAll(async () => {
  db = await createTestDatabase('targets_built');
  await own.create();
  server = await startServer({
    env: {
      DATABASE_URL: db.url,
      TARGETS: [
        `orders=${SHARED_REDIS}#stream:${own.stream}`,
        `sale=${SHARED_AMQP}#exchange:${own.exchange}/sale.start`,
        `audit=${SHARED_NATS}#subject:${own.subject}.audit`,
      ].join(','),
    },
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await own.remove();
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
      async () => Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND id IN (?)", [ids]))[0].n) === 3,
      15_000,
      'the three published',
    );
    expect((await streamEntries(SHARED_REDIS, own.stream)).map((entry) => JSON.parse(entry.fields.body!))).toEqual([{ target: 'orders' }]);
    expect((await drainQueue(SHARED_AMQP, own.queue)).map((message) => JSON.parse(message.body))).toEqual([{ target: 'sale' }]);
    expect((await streamMessages(SHARED_NATS, own.jsStream)).map((message) => JSON.parse(message.data))).toEqual([{ target: 'audit' }]);
  }, 60_000);
});
