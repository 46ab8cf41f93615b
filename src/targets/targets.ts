/**
 * The delivery targets of this process, by name (TARGETS), with their per-target metrics:
 * publishes by outcome, publish time, and whether each is connected. Health is reported on
 * /readyz without failing readiness: a broker that is away fails its tasks' attempts (retried
 * with backoff), it does not stop punctual. See docs/targets.md.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { TargetSpec } from './spec.js';
import type { OutgoingMessage, Target, TargetHealth, TargetKind } from './target.js';

export class Targets {
  readonly #targets = new Map<string, Target>();
  readonly #metrics: { publishes: Counter; seconds: Histogram } | undefined;

  constructor(specs: readonly TargetSpec[], registry?: Registry, make: (spec: TargetSpec) => Target = targetOf) {
    for (const spec of specs) this.#targets.set(spec.name, make(spec));
    if (registry !== undefined && specs.length > 0) {
      this.#metrics = {
        publishes: new Counter({
          name: 'punctual_target_publishes_total',
          help: 'Messages published to delivery targets, by target and outcome (ok: confirmed; failed: the attempt failed).',
          labelNames: ['target', 'outcome'],
          registers: [registry],
        }),
        seconds: new Histogram({
          name: 'punctual_target_publish_seconds',
          help: "How long a publish took until the broker's confirmation, by target.",
          labelNames: ['target'],
          buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
          registers: [registry],
        }),
      };
      const targets = this.#targets;
      new Gauge({
        name: 'punctual_target_up',
        help: 'Whether each delivery target is connected (1) or not (0).',
        labelNames: ['target', 'kind'],
        registers: [registry],
        collect() {
          for (const [name, health] of Object.entries(healthOf(targets))) this.set({ target: name, kind: health.kind }, health.up ? 1 : 0);
        },
      });
    }
  }

  get size(): number {
    return this.#targets.size;
  }

  names(): string[] {
    return [...this.#targets.keys()];
  }

  has(name: string): boolean {
    return this.#targets.has(name);
  }

  /** Connects every target, without waiting: one that is down is retried with backoff. */
  open(): void {
    for (const target of this.#targets.values()) target.open();
  }

  async publish(name: string, message: OutgoingMessage, signal: AbortSignal): Promise<string> {
    const target = this.#targets.get(name);
    if (target === undefined) throw new Error(`no target named ${JSON.stringify(name)} (TARGETS)`);
    const started = performance.now();
    try {
      const outcome = await target.publish(message, signal);
      this.#metrics?.publishes.inc({ target: name, outcome: 'ok' });
      return outcome;
    } catch (error) {
      this.#metrics?.publishes.inc({ target: name, outcome: 'failed' });
      throw error;
    } finally {
      this.#metrics?.seconds.observe({ target: name }, (performance.now() - started) / 1000);
    }
  }

  health(): Record<string, TargetHealth> {
    return healthOf(this.#targets);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#targets.values()].map((target) => target.close()));
  }
}

function healthOf(targets: ReadonlyMap<string, Target>): Record<string, TargetHealth> {
  return Object.fromEntries([...targets].map(([name, target]) => [name, target.health()]));
}

/**
 * Each kind's target class, loaded with its broker client when a target of the kind opens: a
 * process without TARGETS, or without one of a kind, never evaluates that client (ioredis,
 * amqplib, nats: together some 15 ms of every start otherwise).
 */
const CLASSES: Record<TargetKind, () => Promise<new (spec: TargetSpec) => Target>> = {
  redis: async () => (await import('./redis-stream.js')).RedisStreamTarget,
  amqp: async () => (await import('./rabbitmq.js')).RabbitTarget,
  nats: async () => (await import('./nats-jetstream.js')).NatsJetStreamTarget,
};

/** A target whose class (and broker client) is loaded when it opens, or at its first publish. */
class LoadedOnOpen implements Target {
  readonly name: string;
  readonly kind: TargetKind;
  readonly #spec: TargetSpec;
  #target: Promise<Target> | undefined;
  #loaded: Target | undefined;

  constructor(spec: TargetSpec) {
    this.name = spec.name;
    this.kind = spec.kind;
    this.#spec = spec;
  }

  #open(): Promise<Target> {
    this.#target ??= CLASSES[this.kind]().then((Class) => {
      const target = new Class(this.#spec);
      target.open();
      this.#loaded = target;
      return target;
    });
    return this.#target;
  }

  open(): void {
    // A class that cannot load fails its publishes, which say why.
    void this.#open().catch(() => undefined);
  }

  async publish(message: OutgoingMessage, signal: AbortSignal): Promise<string> {
    return (await this.#open()).publish(message, signal);
  }

  health(): TargetHealth {
    return this.#loaded?.health() ?? { kind: this.kind, up: false, lastError: null };
  }

  async close(): Promise<void> {
    if (this.#target !== undefined) await (await this.#target).close();
  }
}

function targetOf(spec: TargetSpec): Target {
  return new LoadedOnOpen(spec);
}
