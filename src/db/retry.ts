/**
 * The one retry helper for database work; the loop exists once, and the transaction runner
 * (transaction.ts) runs database work with it. Policies: `lockConflicts(n)` (a deadlock, a
 * lock-wait timeout or a connection lost before COMMIT: a few quick tries), `growingDelay` (the
 * database failed: tasks back on their timers), `untilStopped(signal)` (the work is done, only
 * its record is missing) and `ranElsewhere(ms)` (a migration met another process's through
 * another Galera node).
 * See docs/architecture.md#retries.
 */
import { sleep } from '../util/async.js';
import { isLockConflict, isLostBeforeCommit, isRanElsewhere } from './errors.js';

export interface RetryPolicy {
  /** Whether `error` is worth another try. */
  retryable(error: unknown): boolean;
  /** Tries in all (Infinity: until `signal` aborts). */
  tries: number;
  /** The wait before try `round + 1`, `round` counting from 1. */
  delayMs(round: number): number;
  /** Persisting stops (the last error goes up) once this is aborted. */
  signal?: AbortSignal;
  /** Told before each wait, e.g. to log. */
  onRetry?(error: unknown, round: number, delayMs: number): void;
}

/** The wait after the database failed, growing to a cap. */
export const DB_RETRY_MS = [100, 250, 500, 1000] as const;

export function growingDelay(round: number): number {
  return DB_RETRY_MS[Math.min(round, DB_RETRY_MS.length) - 1] ?? 1000;
}

/**
 * A deadlock, a lock-wait timeout, or a transaction whose connection broke before its COMMIT went
 * out (a failover, a killed connection: nothing of it was written): try again shortly, on another
 * connection, up to `tries` in all.
 */
export function lockConflicts(tries: number, onRetry?: RetryPolicy['onRetry']): RetryPolicy {
  return {
    retryable: (error) => isLockConflict(error) || isLostBeforeCommit(error),
    tries,
    delayMs: (round) => 10 * round + Math.random() * 40,
    onRetry,
  };
}

/** Any failure: try until written, with a growing delay, until `signal` aborts. */
export function untilStopped(signal: AbortSignal, onRetry?: RetryPolicy['onRetry']): RetryPolicy {
  return { retryable: () => true, tries: Infinity, delayMs: growingDelay, signal, onRetry };
}

/** A migration's statement met what another process migrating at once did, or a lock conflict: again after a pause, for up to `withinMs`. */
export function ranElsewhere(withinMs: number): RetryPolicy {
  return {
    retryable: (error) => isRanElsewhere(error) || isLockConflict(error),
    tries: Infinity,
    delayMs: () => 500,
    signal: AbortSignal.timeout(withinMs),
  };
}

/** Runs `work`, again while the policy says its error is worth another try. */
export async function retrying<T>(work: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  for (let round = 1; ; round++) {
    try {
      return await work();
    } catch (error) {
      if (round >= policy.tries || policy.signal?.aborted === true || !policy.retryable(error)) throw error;
      const delay = policy.delayMs(round);
      policy.onRetry?.(error, round, delay);
      await sleep(delay);
    }
  }
}
