/**
 * A Redis Streams target: `XADD <stream> [MAXLEN ~ n] * key <idempotency key> attempt <n> task <id>
 * type <type> body <json> [h:<name> <value>…]`. Redis answers the entry's id once it is written;
 * a stream does not drop repeats, so a consumer drops them by `key` (the same on every attempt).
 * One ioredis connection, reconnected by ioredis with backoff; no offline queue, so a publish while
 * Redis is away fails the attempt at once instead of waiting in memory (the task is retried).
 */
import { Redis } from 'ioredis';
import { redactCredentials } from '../observability/redact.js';
import type { TargetSpec } from './spec.js';
import { reconnectDelay, type OutgoingMessage, type Target, type TargetHealth } from './target.js';

export class RedisStreamTarget implements Target {
  readonly kind = 'redis' as const;
  readonly name: string;
  readonly #spec: TargetSpec;
  readonly #redis: Redis;
  #lastError: string | null = null;

  constructor(spec: TargetSpec) {
    this.name = spec.name;
    this.#spec = spec;
    this.#redis = new Redis(spec.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 5000,
      retryStrategy: (times) => reconnectDelay(times),
    });
    this.#redis.on('error', (error: Error) => {
      this.#lastError = redactCredentials(error.message);
    });
    this.#redis.on('ready', () => {
      this.#lastError = null;
    });
  }

  open(): void {
    this.#redis.connect().catch(() => undefined); // retried by its retryStrategy; health says why
  }

  async publish(message: OutgoingMessage, signal: AbortSignal): Promise<string> {
    const args: (string | number)[] = [this.#spec.destination];
    if (this.#spec.maxLen !== undefined) args.push('MAXLEN', '~', this.#spec.maxLen);
    args.push('*', 'key', message.key, 'attempt', message.attempt, 'task', message.taskId, 'type', message.type, 'body', message.body);
    for (const [name, value] of Object.entries(message.headers)) args.push(`h:${name}`, value);
    try {
      signal.throwIfAborted();
      const id = await (this.#redis.xadd as (...values: (string | number)[]) => Promise<string | null>)(...args);
      this.#lastError = null;
      return `xadd ${id ?? ''}`.trim();
    } catch (error) {
      const text = redactCredentials(error instanceof Error ? error.message : String(error));
      this.#lastError = text;
      throw new Error(`redis target ${this.name}: ${text}`, { cause: error });
    }
  }

  health(): TargetHealth {
    return { kind: this.kind, up: this.#redis.status === 'ready', lastError: this.#lastError };
  }

  async close(): Promise<void> {
    this.#redis.disconnect(false);
    await Promise.resolve();
  }
}
