/**
 * A NATS JetStream target: publish to the subject with `Nats-Msg-Id` = the idempotency key
 * (`msgID`), so the stream's duplicate window drops a repeat, and wait for the PubAck: a publish
 * that returns is stored in the stream (or was a duplicate of one that is). The stream itself is
 * the shop's (its subjects, storage, duplicate window): punctual only publishes. One connection,
 * reconnected by the client forever, with backoff.
 */
import { connect, Events, headers as natsHeaders, type JetStreamClient, type NatsConnection } from 'nats';
import { redactCredentials } from '../observability/redact.js';
import type { TargetSpec } from './spec.js';
import { reconnectDelay, type OutgoingMessage, type Target, type TargetHealth } from './target.js';

/** How long a publish waits for its PubAck. */
const ACK_TIMEOUT_MS = 5000;

export class NatsJetStreamTarget implements Target {
  readonly kind = 'nats' as const;
  readonly name: string;
  readonly #spec: TargetSpec;
  #connection: Promise<{ nc: NatsConnection; js: JetStreamClient }> | undefined;
  #up = false;
  #failures = 0;
  #closed = false;
  #lastError: string | null = null;

  constructor(spec: TargetSpec) {
    this.name = spec.name;
    this.#spec = spec;
  }

  open(): void {
    void this.#connect().catch(() => undefined);
  }

  #connect(): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
    this.#connection ??= (async () => {
      const url = new URL(this.#spec.url);
      const auth =
        url.username === ''
          ? {}
          : url.password === ''
            ? { token: decodeURIComponent(url.username) }
            : { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
      try {
        const nc = await connect({
          servers: `${url.hostname}:${url.port || '4222'}`,
          ...auth,
          name: `punctual target ${this.name}`,
          maxReconnectAttempts: -1,
          reconnectDelayHandler: () => reconnectDelay(++this.#failures),
          timeout: 5000,
        });
        this.#up = true;
        this.#failures = 0;
        this.#lastError = null;
        void (async () => {
          for await (const status of nc.status()) {
            if (status.type === Events.Disconnect) this.#up = false;
            if (status.type === Events.Reconnect) {
              this.#up = true;
              this.#failures = 0;
            }
            if (status.type === Events.Error) this.#lastError = redactCredentials(JSON.stringify(status.data));
          }
        })();
        void nc.closed().then(() => {
          this.#up = false;
          this.#connection = undefined;
        });
        return { nc, js: nc.jetstream() };
      } catch (error) {
        // The first connect failed: the next publish tries again, after a pause.
        this.#lastError = redactCredentials(error instanceof Error ? error.message : String(error));
        const delay = reconnectDelay(++this.#failures);
        setTimeout(() => {
          this.#connection = undefined;
          if (!this.#closed) this.open();
        }, delay).unref();
        throw error;
      }
    })();
    return this.#connection;
  }

  async publish(message: OutgoingMessage, signal: AbortSignal): Promise<string> {
    try {
      signal.throwIfAborted();
      const { js } = await this.#connect();
      const h = natsHeaders();
      h.set('Punctual-Attempt', String(message.attempt));
      h.set('Punctual-Task', String(message.taskId));
      h.set('Punctual-Type', message.type);
      for (const [name, value] of Object.entries(message.headers)) h.set(name, value);
      const ack = await js.publish(this.#spec.destination, new TextEncoder().encode(message.body), {
        msgID: message.key,
        headers: h,
        timeout: ACK_TIMEOUT_MS,
      });
      this.#lastError = null;
      return ack.duplicate ? `duplicate of ${ack.stream}#${ack.seq}` : `${ack.stream}#${ack.seq}`;
    } catch (error) {
      const text = redactCredentials(error instanceof Error ? error.message : String(error));
      this.#lastError = text;
      throw new Error(`nats target ${this.name}: ${text}`, { cause: error });
    }
  }

  health(): TargetHealth {
    return { kind: this.kind, up: this.#up, lastError: this.#lastError };
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connection = this.#connection;
    this.#connection = undefined;
    if (connection !== undefined) await (await connection.catch(() => undefined))?.nc.close().catch(() => undefined);
  }
}
