/**
 * A clock that moves only when told: the test clock (TEST_CLOCK=on, app/test-clock.ts) and a
 * shop's in-process tests (createPunctual's `clock`). It starts at the wall clock's time and never
 * goes back, so "never early" keeps its meaning: a task runs once the clock reads its runAt.
 */
import type { Clock } from './clock.js';

export class ManualClock implements Clock {
  #now: number;

  constructor(start: number = Date.now()) {
    if (!Number.isSafeInteger(start)) throw new RangeError(`a clock starts at an integer of epoch milliseconds, got ${start}`);
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  /** Moves the clock to `at`; an instant before now is refused (time never goes back). */
  set(at: number): void {
    if (!Number.isSafeInteger(at)) throw new RangeError(`the clock moves to an integer of epoch milliseconds, got ${at}`);
    if (at < this.#now)
      throw new RangeError(`the clock only moves forward: ${new Date(at).toISOString()} is before ${new Date(this.#now).toISOString()}`);
    this.#now = at;
  }
}
