/**
 * A NATS JetStream target: publish to the subject with `Nats-Msg-Id` = the idempotency key
 * (`msgID`), so the stream's duplicate window drops a repeat, and wait for the PubAck: a publish
 * that returns is stored in the stream (or was a duplicate of one that is). The stream itself is
 * the shop's (its subjects, storage, duplicate window): punctual only publishes. One connection,
 * reconnected by the client forever, with backoff.
 */
import { connect, Events, headers as natsHeaders, type JetStreamClient, type NatsConnection } from 'nats';
import type { TargetSpec } from './spec.js';
import { ConnectionState, type OutgoingMessage, type Target, type TargetHealth } from './target.js';

/** How long a publish waits for its PubAck. */
const ACK_TIMEOUT_MS = 5000;

export class NatsJetStreamTarget implements Target {
  readonly kind = 'nats' as const;
  readonly name: string;
  readonly #spec: TargetSpec;
  #connection: Promise<{ nc: NatsConnection; js: JetStreamClient }> | undefined;
  readonly #state = new ConnectionState();

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
          reconnectDelayHandler: () => this.#state.nextDelay(),
          timeout: 5000,
        });
        this.#state.connected();
        void (async () => {
          for await (const status of nc.status()) {
            if (status.type === Events.Disconnect) this.#state.up = false;
            if (status.type === Events.Reconnect) this.#state.connected();
            if (status.type === Events.Error) this.#state.failed(JSON.stringify(status.data));
          }
        })();
        void nc.closed().then(() => {
          this.#state.up = false;
          this.#connection = undefined;
        });
        return { nc, js: nc.jetstream() };
      } catch (error) {
        // The first connect failed: the next publish tries again, after a pause.
        this.#state.failed(error);
        setTimeout(() => {
          this.#connection = undefined;
          if (!this.#state.closed) this.open();
        }, this.#state.nextDelay()).unref();
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
      this.#state.lastError = null;
      return ack.duplicate ? `duplicate of ${ack.stream}#${ack.seq}` : `${ack.stream}#${ack.seq}`;
    } catch (error) {
      throw new Error(`nats target ${this.name}: ${this.#state.failed(error)}`, { cause: error });
    }
  }

  health(): TargetHealth {
    return this.#state.health(this.kind);
  }

  async close(): Promise<void> {
    this.#state.closed = true;
    const connection = this.#connection;
    this.#connection = undefined;
    if (connection !== undefined) await (await connection.catch(() => undefined))?.nc.close().catch(() => undefined);
  }
}
