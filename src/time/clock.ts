/**
 * The one place punctual reads the wall clock. Everything that compares with "now" takes it from
 * a Clock (or as a parameter), so tests can move time even against a real database.
 */
export interface Clock {
  /** Wall-clock time in epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Resolves once `clock` reads `at` or later, by timers alone (a timer may wake a little early by the
 * wall clock, libuv's cached loop time: it is set again for the rest; never a busy wait, which
 * would take the CPU from the database on a loaded machine). A wall clock stepped back meanwhile is
 * waited out too.
 */
export async function until(clock: Clock, at: number): Promise<void> {
  for (let left = at - clock.now(); left > 0; left = at - clock.now()) {
    await new Promise<void>((resolve) => setTimeout(resolve, left));
  }
}
