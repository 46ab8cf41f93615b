/**
 * The brokers the delivery targets publish to, seen from the tests: read what a Redis stream, a
 * RabbitMQ queue or a JetStream stream holds; set up and remove the tests' own streams, exchanges
 * and queues (random names) on the machine's shared servers; and servers of a test's own (a
 * redis-server, a nats-server -js on their own ports and folders) that a test may kill and start
 * again. The shared servers are never restarted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connect as amqpConnect } from 'amqplib';
import { Redis } from 'ioredis';
import { connect as natsConnect, type NatsConnection } from 'nats';

export const SHARED_REDIS = 'redis://127.0.0.1:6379';
export const SHARED_AMQP = 'amqp://guest:guest@127.0.0.1:5672';
export const SHARED_NATS = 'nats://127.0.0.1:4222';

export const suffix = () => `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// ── Redis ─────────────────────────────────────────────────────────────────────────────────────

export interface StreamEntry {
  id: string;
  fields: Record<string, string>;
}

export async function streamEntries(url: string, stream: string): Promise<StreamEntry[]> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const rows = await redis.xrange(stream, '-', '+');
    return rows.map(([id, flat]) => {
      const fields: Record<string, string> = {};
      for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
      return { id, fields };
    });
  } finally {
    redis.disconnect();
  }
}

export async function deleteStream(url: string, stream: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  await redis.del(stream).finally(() => redis.disconnect());
}

// ── RabbitMQ ──────────────────────────────────────────────────────────────────────────────────

/** A direct exchange of the test's own and a queue bound to it with `routingKey`. */
export async function bindQueue(url: string, exchange: string, queue: string, routingKey: string): Promise<void> {
  const connection = await amqpConnect(url);
  try {
    const channel = await connection.createChannel();
    await channel.assertExchange(exchange, 'direct', { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, exchange, routingKey);
    await channel.close();
  } finally {
    await connection.close();
  }
}

export interface QueuedMessage {
  messageId: string | undefined;
  persistent: boolean;
  body: string;
  headers: Record<string, unknown>;
}

/** Every message in `queue`, taken off it. */
export async function drainQueue(url: string, queue: string): Promise<QueuedMessage[]> {
  const connection = await amqpConnect(url);
  const messages: QueuedMessage[] = [];
  try {
    const channel = await connection.createChannel();
    for (;;) {
      const message = await channel.get(queue, { noAck: true });
      if (message === false) break;
      messages.push({
        messageId: message.properties.messageId as string | undefined,
        persistent: message.properties.deliveryMode === 2,
        body: message.content.toString(),
        headers: message.properties.headers ?? {},
      });
    }
    await channel.close();
  } finally {
    await connection.close();
  }
  return messages;
}

export async function removeExchange(url: string, exchange: string, queue: string): Promise<void> {
  const connection = await amqpConnect(url);
  try {
    const channel = await connection.createChannel();
    await channel.deleteQueue(queue);
    await channel.deleteExchange(exchange);
    await channel.close();
  } finally {
    await connection.close();
  }
}

// ── NATS JetStream ────────────────────────────────────────────────────────────────────────────

async function withNats<T>(url: string, fn: (nc: NatsConnection) => Promise<T>): Promise<T> {
  const nc = await natsConnect({ servers: new URL(url).host, timeout: 5000 });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

/** A stream of the test's own on `subjects`, dropping repeats of a Nats-Msg-Id within `duplicateWindowMs`. */
export async function addStream(url: string, name: string, subjects: string[], duplicateWindowMs = 120_000): Promise<void> {
  await withNats(url, async (nc) => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name, subjects, duplicate_window: duplicateWindowMs * 1_000_000 });
  });
}

export interface StoredMessage {
  seq: number;
  msgId: string | undefined;
  data: string;
}

export async function streamMessages(url: string, name: string): Promise<StoredMessage[]> {
  return withNats(url, async (nc) => {
    const jsm = await nc.jetstreamManager();
    const info = await jsm.streams.info(name);
    const messages: StoredMessage[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const stored = await jsm.streams.getMessage(name, { seq });
      messages.push({ seq, msgId: stored.header?.get('Nats-Msg-Id'), data: new TextDecoder().decode(stored.data) });
    }
    return messages;
  });
}

export async function removeStream(url: string, name: string): Promise<void> {
  await withNats(url, async (nc) => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(name);
  }).catch(() => undefined);
}

// ── a test file's own objects on the shared servers ──────────────────────────────────────────

/**
 * A Redis stream, a RabbitMQ exchange with a queue bound by `sale.start`, and a JetStream stream
 * over `<subject>.>`, named `<label>` and a random suffix, for one test file: create() makes the
 * exchange, queue and JetStream stream (XADD makes the Redis stream), remove() takes all away.
 */
export function ownBrokerObjects(label: string) {
  const id = suffix();
  const names = {
    stream: `punctual-${label}-${id}`,
    exchange: `punctual-${label}-${id}`,
    queue: `punctual-${label}-${id}`,
    jsStream: `PUNCTUAL_${label.toUpperCase()}_${id.toUpperCase()}`,
    subject: `punctual.${label}.${id}`,
  };
  return {
    ...names,
    async create(): Promise<void> {
      await bindQueue(SHARED_AMQP, names.exchange, names.queue, 'sale.start');
      await addStream(SHARED_NATS, names.jsStream, [`${names.subject}.>`]);
    },
    async remove(): Promise<void> {
      await deleteStream(SHARED_REDIS, names.stream).catch(() => undefined);
      await removeExchange(SHARED_AMQP, names.exchange, names.queue).catch(() => undefined);
      await removeStream(SHARED_NATS, names.jsStream);
    },
  };
}

// ── servers of a test's own ───────────────────────────────────────────────────────────────────

/** A broker process of the test's own, on its own port and folder, that the test may kill and start again. */
export class OwnServer {
  #child: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), 'punctual-broker-'));

  private constructor(
    readonly kind: 'redis' | 'nats',
    readonly port: number,
  ) {}

  static async start(kind: 'redis' | 'nats'): Promise<OwnServer> {
    const server = new OwnServer(kind, await freePort());
    await server.#spawn();
    return server;
  }

  get url(): string {
    return `${this.kind}://127.0.0.1:${this.port}`;
  }

  async #spawn(): Promise<void> {
    const [command, args] =
      this.kind === 'redis'
        ? // appendfsync always: what Redis acknowledged survives a kill -9, as a shop would run a stream it relies on.
          [
            'redis-server',
            [
              '--port',
              String(this.port),
              '--bind',
              '127.0.0.1',
              '--save',
              '',
              '--appendonly',
              'yes',
              '--appendfsync',
              'always',
              '--dir',
              this.dir,
            ],
          ]
        : ['nats-server', ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.dir]];
    this.#child = spawn(command, args, { stdio: 'ignore' });
    await this.#waitListening();
  }

  async #waitListening(): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const ok = await new Promise<boolean>((resolve) => {
        const conn = tcpConnect(this.port, '127.0.0.1');
        conn.once('connect', () => {
          conn.destroy();
          resolve(true);
        });
        conn.once('error', () => resolve(false));
      });
      if (ok) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`${this.kind}-server did not listen on ${this.port}`);
  }

  /** kill -9: what a crash or a power cut does. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (child === undefined || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  async restart(): Promise<void> {
    await this.kill();
    await this.#spawn();
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
