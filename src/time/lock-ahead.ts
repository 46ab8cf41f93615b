/**
 * How long before its `runAt` a task's batch may start: claim its row and lock what its handler
 * locks, so that only the COMMIT (with the writes held back to travel with it) is left for `runAt`.
 * Across a network each statement is a round trip: a batch started at `runAt` closes its orders
 * about three round trips late, one started this much earlier about half of one. Nothing commits
 * early: the batch waits for `runAt` before its COMMIT (dispatch/batch-try.ts).
 *
 * `auto` is two of the database's round trips (the claim, the handler's locking read) and 2 ms for
 * the timer and the pool, at most AUTO_MAX_MS; the round trip is the database clock's measurement
 * (db-clock.ts: the shortest of three, at boot and after every reconcile). Before the first
 * measurement it is the 2 ms alone. See docs/architecture.md#locked-ahead-committed-on-time.
 */
import type { ClockReading } from './db-clock.js';

/** `auto` never locks a task more than this before its runAt. */
export const AUTO_MAX_MS = 50;
const MARGIN_MS = 2;

/** The lead in ms now, for a setting of a fixed number of ms or `auto`. */
export function lockAhead(setting: number | 'auto', reading: () => ClockReading): () => number {
  if (setting !== 'auto') return () => setting;
  return () => {
    const halfRoundTrip = reading().uncertaintyMs ?? 0;
    return Math.min(AUTO_MAX_MS, Math.ceil(4 * halfRoundTrip) + MARGIN_MS);
  };
}
