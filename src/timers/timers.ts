/**
 * One setTimeout per armed task, and nothing else per task: the id is the timer's argument and its
 * runAt a property. Invariants 2 and 5: a task never starts early, past 24.8 days too. The delay is
 * clamped to 2^31-1 ms, and a timer that wakes before `runAt` by the wall clock (the clamp, the
 * monotonic clock, libuv's cached loop time) is re-armed for the rest.
 *
 * With a lead (LOCK_AHEAD_MS, time/lock-ahead.ts) a task is handed over that much before its
 * `runAt`, never more: its batch claims it and locks its rows early, and waits for `runAt` before
 * anything of it commits or any handler that does not lock ahead starts (dispatch/batch-try.ts).
 * See docs/architecture.md#timers.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';

export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

interface ArmedTimer extends NodeJS.Timeout {
  runAt: number;
  /** The task's priority, handed over with its id when it is due (0 for most). */
  priority: number;
}

export type DueCallback = (id: number, priority: number) => void;

/** A task armed when already due: handed over with the others due at once, not on a timer of its own. */
interface DueNow {
  runAt: number;
  priority: number;
}

export class Timers {
  readonly #armed = new Map<number, ArmedTimer>();
  /**
   * Tasks armed already due (a boot load of overdue rows, a runAt inside the lead), handed over
   * together on the next check phase: a setTimeout(0) each would land in as many loop turns as the
   * arming took milliseconds, and the first ones would start before a higher priority read after them.
   */
  readonly #dueNow = new Map<number, DueNow>();
  #dueNowScheduled = false;
  readonly #onTimer = (id: number): void => this.#fire(id);

  /** `registry`: where the armed-timers gauge goes (none in tests that do not scrape). */
  constructor(
    private readonly clock: Clock,
    private readonly onDue: DueCallback,
    registry?: Registry,
    /** How long before its runAt a task is handed over (0: at its runAt). */
    private readonly lead: () => number = () => 0,
  ) {
    const armed = () => this.size;
    if (registry !== undefined) {
      new Gauge({
        name: 'punctual_armed_timers',
        help: 'Tasks with a timer in this process (those due within the horizon).',
        registers: [registry],
        collect() {
          this.set(armed());
        },
      });
    }
  }

  /** Arms (or re-arms) task `id` for `runAt`. Arming again for the same time changes nothing. */
  arm(id: number, runAt: number, priority = 0): void {
    const current = this.#armed.get(id) ?? this.#dueNow.get(id);
    if (current !== undefined && current.runAt === runAt && current.priority === priority) return;
    this.#start(id, runAt, priority); // replaces any earlier entry
  }

  disarm(id: number): boolean {
    if (this.#dueNow.delete(id)) return true;
    const timer = this.#armed.get(id);
    if (timer === undefined) return false;
    clearTimeout(timer);
    this.#armed.delete(id);
    return true;
  }

  disarmAll(): void {
    for (const timer of this.#armed.values()) clearTimeout(timer);
    this.#armed.clear();
    this.#dueNow.clear();
  }

  has(id: number): boolean {
    return this.#armed.has(id) || this.#dueNow.has(id);
  }

  /** The time task `id` is armed for, if it is. */
  runAtOf(id: number): number | undefined {
    return (this.#armed.get(id) ?? this.#dueNow.get(id))?.runAt;
  }

  /** The armed ids (a copy: disarming while iterating is fine). */
  ids(): number[] {
    return [...this.#armed.keys(), ...this.#dueNow.keys()];
  }

  get size(): number {
    return this.#armed.size + this.#dueNow.size;
  }

  /** How many armed tasks are due (handed over once their timer or the due-now turn runs). */
  dueCount(): number {
    const by = this.clock.now() + this.lead();
    let due = this.#dueNow.size;
    for (const timer of this.#armed.values()) if (timer.runAt <= by) due++;
    return due;
  }

  /**
   * Hook for time/step-watch.ts: the wall clock stepped, so every timer is set again from its runAt
   * against the new time. Those now due are handed over at once, in runAt order (then id);
   * answers how many.
   */
  rearmAll(): number {
    const now = this.clock.now();
    const lead = this.lead();
    const due: { id: number; runAt: number; priority: number }[] = [];
    const dueNow = [...this.#dueNow];
    for (const [id, timer] of [...this.#armed]) {
      clearTimeout(timer);
      if (timer.runAt - lead <= now) due.push({ id, runAt: timer.runAt, priority: timer.priority });
      else this.#start(id, timer.runAt, timer.priority, now);
    }
    for (const [id, entry] of dueNow) {
      if (entry.runAt - lead <= now) due.push({ id, ...entry });
      else this.#start(id, entry.runAt, entry.priority, now); // stepped back: no longer due
    }
    due.sort((a, b) => a.runAt - b.runAt || a.id - b.id);
    for (const { id, priority } of due) {
      this.#armed.delete(id);
      this.#dueNow.delete(id);
      this.onDue(id, priority);
    }
    return due.length;
  }

  #start(id: number, runAt: number, priority: number, now = this.clock.now()): void {
    const delay = Math.min(Math.max(runAt - this.lead() - now, 0), MAX_TIMER_DELAY_MS);
    // An id is in one of the two maps at most: a stale entry in the other would make a later arm
    // for the same time look done and change nothing.
    const previous = this.#armed.get(id);
    if (previous !== undefined) clearTimeout(previous);
    this.#armed.delete(id);
    this.#dueNow.delete(id);
    if (delay === 0) {
      this.#dueNow.set(id, { runAt, priority });
      this.#scheduleDueNow();
      return;
    }
    const timer = setTimeout(this.#onTimer, delay, id) as ArmedTimer;
    timer.runAt = runAt;
    timer.priority = priority;
    timer.unref();
    this.#armed.set(id, timer);
  }

  #scheduleDueNow(): void {
    if (this.#dueNowScheduled) return;
    this.#dueNowScheduled = true;
    setImmediate(() => {
      this.#dueNowScheduled = false;
      // A handler may arm or disarm while this runs: only entries still as they were go now.
      for (const [id, entry] of [...this.#dueNow]) {
        if (this.#dueNow.get(id) !== entry) continue;
        this.#dueNow.delete(id);
        this.onDue(id, entry.priority);
      }
    });
  }

  #fire(id: number): void {
    const timer = this.#armed.get(id);
    if (timer === undefined) return;
    if (this.clock.now() < timer.runAt - this.lead()) {
      this.#start(id, timer.runAt, timer.priority); // woke early by the wall clock, or clamped: sleep the rest
      return;
    }
    this.#armed.delete(id);
    this.onDue(id, timer.priority);
  }
}
