/**
 * The wake-up timers of the type limits: one per group key held back by its rate window, set for
 * when the window has room. A key keeps the timer it has (the earliest wake-up asked for it); the
 * timers are unref'ed, so a waiting task never keeps the process alive.
 */

export class WakeTimers {
  readonly #timers = new Map<string, NodeJS.Timeout>();

  /** Calls `wake` in `delayMs` (at least 1 ms) for `key`, unless a timer is set for it already. */
  set(key: string, delayMs: number, wake: () => void): void {
    if (this.#timers.has(key)) return;
    const timer = setTimeout(
      () => {
        this.#timers.delete(key);
        wake();
      },
      Math.max(1, delayMs),
    );
    timer.unref();
    this.#timers.set(key, timer);
  }

  has(key: string): boolean {
    return this.#timers.has(key);
  }

  get size(): number {
    return this.#timers.size;
  }

  /** Cancels every timer. */
  clear(): void {
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }
}
