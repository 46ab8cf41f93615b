/**
 * What a delivery target is: a named broker destination from the configuration (TARGETS), never
 * an address in a request, so no caller can point punctual at a server of its choosing. Each
 * target keeps one connection, reconnected with backoff, publishes one message at a time per task
 * and answers only once the broker confirmed it (a Redis reply, a publisher confirm, a PubAck), so
 * a publish that returns is durable there and one that throws fails the attempt: at least once,
 * with the task's idempotency key as the message id. See docs/targets.md.
 */

import { redactCredentials } from '../observability/redact.js';

export type TargetKind = 'redis' | 'amqp' | 'nats';

/** One message of a task's attempt. */
export interface OutgoingMessage {
  /** The task's idempotency key: the message id, the same on every attempt. */
  key: string;
  attempt: number;
  taskId: number;
  type: string;
  /** The payload's `message`, as JSON text. */
  body: string;
  /** The payload's `headers`: names of letters, digits and `-`. */
  headers: Record<string, string>;
}

/**
 * Header names a message may not carry: those punctual sets itself, and those a broker acts on
 * rather than carries. RabbitMQ routes a message on `CC` and `BCC` (sender-selected distribution:
 * to other queues, and on a name that is no queue it closes the whole confirm channel with a 406,
 * failing every other publish in flight on it), delays it on `x-delay`, and sets the `x-death`,
 * `x-first-death-*`, `x-last-death-*` and `x-received-from` of dead-lettered and shovelled
 * messages, which consumers trust; `x-stream-filter-value` filters streams. NATS reads `Nats-*`.
 */
const RESERVED_HEADER =
  /^(punctual-|x-punctual-|nats-|cc$|bcc$|x-delay$|x-death$|x-first-death-|x-last-death-|x-received-from$|x-stream-filter-value$|x-opt-)/i;

/** The first of `headers` a message may not carry, as written; undefined when there is none. */
export function firstBrokerReserved(headers: Record<string, string>): string | undefined {
  return Object.keys(headers).find((name) => RESERVED_HEADER.test(name));
}

export interface TargetHealth {
  kind: TargetKind;
  /** Connected now. */
  up: boolean;
  /** The last connection or publish error, credentials masked; null when the last try worked. */
  lastError: string | null;
}

export interface Target {
  readonly name: string;
  readonly kind: TargetKind;
  /** Publishes and waits for the broker's confirmation; answers a short word for the log. Throws when not confirmed. */
  publish(message: OutgoingMessage, signal: AbortSignal): Promise<string>;
  health(): TargetHealth;
  /** Connects now (at boot), without failing: a target that is down is retried with backoff. */
  open(): void;
  close(): Promise<void>;
}

/** A failure no retry fixes (an unroutable AMQP message is not one: a binding may come). */
export class TargetRefused extends Error {
  override name = 'TargetRefused';
}

/** Reconnect delays: 200 ms doubling up to 10 s, with jitter. */
export function reconnectDelay(failures: number): number {
  const base = Math.min(10_000, 200 * 2 ** Math.max(0, failures - 1));
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/**
 * A broker connection's state as its target's health tells it (the AMQP and NATS targets; Redis's
 * client keeps its own): up or not, the failures in a row that pace the reconnects, the last
 * error with its credentials masked, and whether the target was closed.
 */
export class ConnectionState {
  up = false;
  closed = false;
  lastError: string | null = null;
  #failures = 0;

  /** Connected (or reconnected): the backoff starts over. */
  connected(): void {
    this.up = true;
    this.#failures = 0;
    this.lastError = null;
  }

  /** Records `error` (masked) as the last; answers its text. */
  failed(error: unknown): string {
    this.lastError = redactCredentials(error instanceof Error ? error.message : String(error));
    return this.lastError;
  }

  /** One more failure in a row: the wait before the next reconnect. */
  nextDelay(): number {
    return reconnectDelay(++this.#failures);
  }

  health(kind: TargetKind): TargetHealth {
    return { kind, up: this.up, lastError: this.lastError };
  }
}
