/**
 * When a failed task runs again: exponential backoff from RETRY_BASE_MS, doubling per attempt,
 * capped at RETRY_MAX_MS, plus up to 10% jitter so tasks that failed together do not come back
 * together. No retry once the task has used all its attempts.
 */
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
  /** Source of jitter in [0, 1); replaceable in tests. */
  random?: () => number;
}

/** The delay before attempt `attemptsUsed + 1`. */
export function backoffMs(policy: BackoffPolicy, attemptsUsed: number): number {
  const exponential = policy.baseMs * 2 ** Math.min(Math.max(attemptsUsed - 1, 0), 40);
  const capped = Math.min(exponential, policy.maxMs);
  return Math.round(capped * (1 + 0.1 * (policy.random ?? Math.random)()));
}

/**
 * When to run again after a failed attempt, or null when the task is out of attempts. `askedMs`:
 * the wait the other side asked for (Retry-After); the retry comes no sooner than that, capped
 * at the policy's maximum, and no sooner than the backoff either.
 */
export function retryAt(policy: BackoffPolicy, attemptsUsed: number, maxAttempts: number, now: number, askedMs?: number): number | null {
  if (attemptsUsed >= maxAttempts) return null;
  const backoff = backoffMs(policy, attemptsUsed);
  return now + (askedMs === undefined ? backoff : Math.max(backoff, Math.min(askedMs, policy.maxMs)));
}
