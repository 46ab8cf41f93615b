/**
 * Repeated warnings, summarised: the first warning of a kind is logged at once (an operator sees
 * the trouble begin), the repeats within the next interval are only counted, and at the end of
 * the interval one line says how many came and what the last one said. While they keep coming,
 * that is one line per interval per kind; after a quiet interval the next one is logged at once
 * again. A database outage makes every failed batch and every retry warn: without this, a 6 s
 * outage wrote over a thousand lines that said the same thing.
 */
import type { Logger } from 'pino';

export const SUMMARY_INTERVAL_MS = 5000;

type Level = 'warn' | 'error';

interface Repeats {
  count: number;
  level: Level;
  fields: Record<string, unknown>;
  message: string;
  timer: NodeJS.Timeout;
}

export class RepeatedWarnings {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #kinds = new Map<string, Repeats>();

  constructor(log: Logger, intervalMs = SUMMARY_INTERVAL_MS) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  /** A warning of `kind` (its message, usually): logged now, or counted into the interval's summary. */
  warn(kind: string, fields: Record<string, unknown>, message: string, level: Level = 'warn'): void {
    const repeats = this.#kinds.get(kind);
    if (repeats !== undefined) {
      repeats.count++;
      // The summary takes the worst level of its interval, and the last warning's fields.
      if (level === 'error') repeats.level = 'error';
      repeats.fields = fields;
      repeats.message = message;
      return;
    }
    this.#log[level](fields, message);
    this.#kinds.set(kind, { count: 0, level: 'warn', fields, message, timer: this.#timer(kind) });
  }

  /** Logs what was counted and forgets every kind (at stop: no timer is left behind). */
  flush(): void {
    for (const [kind, repeats] of this.#kinds) {
      clearTimeout(repeats.timer);
      this.#summarise(repeats);
      this.#kinds.delete(kind);
    }
  }

  #timer(kind: string): NodeJS.Timeout {
    const timer = setTimeout(() => this.#endInterval(kind), this.#intervalMs);
    timer.unref?.();
    return timer;
  }

  #endInterval(kind: string): void {
    const repeats = this.#kinds.get(kind);
    if (repeats === undefined) return;
    if (repeats.count === 0) {
      this.#kinds.delete(kind);
      return;
    }
    this.#summarise(repeats);
    repeats.count = 0;
    repeats.level = 'warn';
    repeats.timer = this.#timer(kind);
  }

  #summarise(repeats: Repeats): void {
    if (repeats.count === 0) return;
    const seconds = this.#intervalMs / 1000;
    this.#log[repeats.level](
      { ...repeats.fields, repeated: repeats.count, intervalMs: this.#intervalMs },
      `${repeats.message} (${repeats.count} more like it within ${seconds} s; the last shown)`,
    );
  }
}
