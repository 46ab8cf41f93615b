/**
 * The one place punctual reads the wall clock. Everything that compares with "now" takes it from
 * a Clock (or as a parameter), so tests can move time even against a real database.
 */
export interface Clock {
  /** Wall-clock time in epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
