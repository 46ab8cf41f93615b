/**
 * One setTimeout per armed task. Two traps are handled here:
 *
 * - setTimeout fires at once for delays above 2^31-1 ms (24.8 days), so the delay is clamped and
 *   a timer that wakes before its time simply sleeps again.
 * - Node timers run on a monotonic clock, and libuv measures from a time cached at the start of
 *   the loop turn; either can wake a timer before `runAt` by the wall clock. When that happens the
 *   timer is re-armed for the rest: a task never starts early.
 */
import type { Clock } from '../clock.js';

export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** What is kept per armed task: no payload, that is loaded when it fires. */
class Armed {
  timer: NodeJS.Timeout | undefined;
  constructor(
    readonly id: number,
    readonly runAt: number,
    readonly type: string,
  ) {}
}

export type DueCallback = (id: number, runAt: number, type: string) => void;

export class Timers {
  readonly #armed = new Map<number, Armed>();
  readonly #onTimer = (entry: Armed): void => this.#fire(entry);

  constructor(
    private readonly clock: Clock,
    private readonly onDue: DueCallback,
  ) {}

  /** Arms (or re-arms) task `id` for `runAt`. Arming again for the same time changes nothing. */
  arm(id: number, runAt: number, type: string): void {
    const current = this.#armed.get(id);
    if (current !== undefined) {
      if (current.runAt === runAt) return;
      clearTimeout(current.timer);
    }
    const entry = new Armed(id, runAt, type);
    this.#armed.set(id, entry);
    this.#start(entry);
  }

  disarm(id: number): boolean {
    const entry = this.#armed.get(id);
    if (entry === undefined) return false;
    clearTimeout(entry.timer);
    this.#armed.delete(id);
    return true;
  }

  disarmAll(): void {
    for (const entry of this.#armed.values()) clearTimeout(entry.timer);
    this.#armed.clear();
  }

  has(id: number): boolean {
    return this.#armed.has(id);
  }

  /** The time task `id` is armed for, if it is. */
  runAtOf(id: number): number | undefined {
    return this.#armed.get(id)?.runAt;
  }

  get size(): number {
    return this.#armed.size;
  }

  #start(entry: Armed): void {
    const delay = Math.min(Math.max(entry.runAt - this.clock.now(), 0), MAX_TIMER_DELAY_MS);
    entry.timer = setTimeout(this.#onTimer, delay, entry);
    entry.timer.unref();
  }

  #fire(entry: Armed): void {
    if (this.#armed.get(entry.id) !== entry) return; // re-armed or disarmed meanwhile
    if (this.clock.now() < entry.runAt) {
      this.#start(entry); // woke early by the wall clock, or clamped: sleep the rest
      return;
    }
    this.#armed.delete(entry.id);
    this.onDue(entry.id, entry.runAt, entry.type);
  }
}
