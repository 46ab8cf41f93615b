/**
 * A RabbitMQ target (AMQP 0-9-1, amqplib): publish to the exchange with the routing key on a
 * confirm channel, `persistent`, `message_id` = the idempotency key, and `mandatory`, so a message
 * no queue is bound for comes back (`basic.return`, sent before its confirm) and fails the
 * attempt instead of vanishing. A publish returns once the broker confirmed it (`basic.ack`); a
 * `basic.nack`, a return, or a connection lost before the confirm throws, and the task is retried.
 * One connection and one confirm channel, opened again with backoff when they close.
 */
import { connect, type ChannelModel, type ConfirmChannel, type ConsumeMessage } from 'amqplib';
import type { TargetSpec } from './spec.js';
import { ConnectionState, firstBrokerReserved, type OutgoingMessage, type Target, type TargetHealth } from './target.js';

/** How long a publish waits for its confirm. */
const CONFIRM_TIMEOUT_MS = 5000;

interface Open {
  connection: ChannelModel;
  channel: ConfirmChannel;
  /** Returned (unroutable) messages by message id, until their confirm comes. */
  returned: Set<string>;
}

export class RabbitTarget implements Target {
  readonly kind = 'amqp' as const;
  readonly name: string;
  readonly #spec: TargetSpec;
  #open: Promise<Open> | undefined;
  readonly #state = new ConnectionState();
  #retry: NodeJS.Timeout | undefined;

  constructor(spec: TargetSpec) {
    this.name = spec.name;
    this.#spec = spec;
  }

  open(): void {
    void this.#connect().catch(() => undefined);
  }

  /** The open channel, or a new connection; after a failure, again only once the backoff passed. */
  #connect(): Promise<Open> {
    if (this.#state.closed) return Promise.reject(new Error('target closed'));
    // Publishes while a reconnect waits fail at once: the broker sees the backoff, not a connect per publish.
    if (this.#open === undefined && this.#retry !== undefined) {
      return Promise.reject(new Error(`reconnecting after: ${this.#state.lastError ?? 'connection lost'}`));
    }
    const opening = (this.#open ??= (async () => {
      try {
        const connection = await connect(this.#spec.url, { timeout: 5000 });
        const channel = await connection.createConfirmChannel();
        const open: Open = { connection, channel, returned: new Set() };
        channel.on('return', (message: ConsumeMessage) => {
          const id = message.properties.messageId as string | undefined;
          if (id !== undefined) open.returned.add(id);
        });
        const lost = (error?: unknown) => {
          if (error !== undefined) this.#state.failed(error);
          // A late close of a connection already replaced must not take down the new one.
          if (this.#open !== opening) return;
          this.#state.up = false;
          this.#open = undefined;
          this.#scheduleReconnect();
        };
        connection.on('error', (error) => this.#state.failed(error));
        connection.on('close', () => lost());
        channel.on('error', (error) => this.#state.failed(error));
        channel.on('close', () => {
          // A channel closed by the broker (a missing exchange: 404) with the connection still up.
          void connection.close().catch(() => undefined);
          lost();
        });
        this.#state.connected();
        return open;
      } catch (error) {
        this.#state.failed(error);
        this.#open = undefined;
        this.#scheduleReconnect();
        throw error;
      }
    })());
    return opening;
  }

  #scheduleReconnect(): void {
    if (this.#state.closed || this.#retry !== undefined) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.open();
    }, this.#state.nextDelay());
    this.#retry.unref();
  }

  async publish(message: OutgoingMessage, signal: AbortSignal): Promise<string> {
    // A task written before its headers were checked at create (or straight into the table) must
    // not reach the shared channel with a header the broker acts on: it fails alone, here.
    const reserved = firstBrokerReserved(message.headers);
    if (reserved !== undefined) throw new Error(`amqp target ${this.name}: the message may not carry the header ${reserved}`);
    try {
      signal.throwIfAborted();
      const open = await this.#connect();
      open.returned.delete(message.key);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no confirm within ${CONFIRM_TIMEOUT_MS} ms`)), CONFIRM_TIMEOUT_MS);
        try {
          open.channel.publish(
            this.#spec.destination,
            this.#spec.routingKey ?? '',
            Buffer.from(message.body),
            {
              persistent: true,
              mandatory: true,
              messageId: message.key,
              contentType: 'application/json',
              type: message.type,
              headers: { ...message.headers, 'x-punctual-attempt': message.attempt, 'x-punctual-task': message.taskId },
            },
            (error: unknown) => {
              clearTimeout(timer);
              if (error !== null && error !== undefined) reject(error instanceof Error ? error : new Error('nacked by the broker'));
              else resolve();
            },
          );
        } catch (error) {
          clearTimeout(timer);
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
      // RabbitMQ sends basic.return before the confirm of the same message.
      if (open.returned.delete(message.key)) {
        throw new Error(
          `unroutable: no queue is bound to exchange ${JSON.stringify(this.#spec.destination)} for ${JSON.stringify(this.#spec.routingKey)}`,
        );
      }
      this.#state.lastError = null;
      return 'confirmed';
    } catch (error) {
      throw new Error(`amqp target ${this.name}: ${this.#state.failed(error)}`, { cause: error });
    }
  }

  health(): TargetHealth {
    return this.#state.health(this.kind);
  }

  async close(): Promise<void> {
    this.#state.closed = true;
    clearTimeout(this.#retry);
    const open = this.#open;
    this.#open = undefined;
    if (open !== undefined) await (await open.catch(() => undefined))?.connection.close().catch(() => undefined);
  }
}
