/**
 * `Retry-After` (RFC 9110 §10.2.3): a receiver answering 429 or 503 says when to come back, as a
 * number of seconds or an HTTP date. A handler that was told so throws `RetryLater`; the
 * lifecycle's backoff then runs the next attempt no sooner than that (capped by RETRY_MAX_MS),
 * instead of on punctual's own schedule.
 * See docs/handlers.md#retry-after.
 */

/** A run that failed and was told how long to wait before the next attempt. */
export class RetryLater extends Error {
  override name = 'RetryLater';
  constructor(
    message: string,
    /** How long the other side asked punctual to wait, in ms from the answer. */
    readonly afterMs: number,
  ) {
    super(message);
  }
}

/** HTTP dates come in three forms (IMF-fixdate, RFC 850, asctime); Date.parse reads all three. */
const HTTP_DATE = /^[A-Za-z]{3,9},? [\w :-]+(GMT)?$/;

/**
 * The wait a `Retry-After` value asks for, in ms from `now`, or undefined when the header is
 * missing or unreadable (then punctual's own backoff applies). A date in the past is no wait.
 */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === '') return undefined;
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  if (!HTTP_DATE.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(at - now, 0);
}
