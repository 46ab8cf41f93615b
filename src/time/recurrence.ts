/**
 * Recurring tasks: a cron expression read in the task's IANA zone. The expression is matched
 * against wall-clock times in that zone (croner does the matching), and each wall-clock time
 * becomes an instant by the same DST rule as a naive runAt: in a spring-forward gap it moves
 * forward by the length of the gap, in a fall-back overlap it is the earlier of the two. So in
 * America/New_York a daily 02:30 runs at 03:30 EDT on the day 02:30 does not exist, and a daily
 * 01:30 runs once, at 01:30 EDT, on the day 01:30 happens twice: no day skipped, none doubled.
 */
import { Cron } from 'croner';
import { Temporal } from 'temporal-polyfill';

export class CronError extends Error {
  override name = 'CronError';
}

const cache = new Map<string, Cron>();

/** The parsed expression; five fields (minute hour day month weekday), no seconds. */
function parse(expression: string): Cron {
  let cron = cache.get(expression);
  if (cron !== undefined) return cron;
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5) {
    throw new CronError(`must have five fields (minute hour day-of-month month day-of-week), got ${fields.length}`);
  }
  try {
    // Matched in UTC on purpose: the dates it sees are the zone's wall-clock times written as UTC.
    cron = new Cron(expression, { timezone: 'UTC', paused: true });
  } catch (error) {
    throw new CronError(`is not a cron expression: ${(error as Error).message}`);
  }
  if (cache.size > 1000) cache.clear();
  cache.set(expression, cron);
  return cron;
}

/** Checks `expression` (throws CronError with a message for the caller). */
export function checkCron(expression: string): void {
  if (parse(expression).nextRun(new Date(0)) === null) throw new CronError('never matches any date');
}

/** The first occurrence of `expression` in `zone` strictly after `after` (epoch ms), or null. */
export function nextOccurrence(expression: string, zone: string, after: number): number | null {
  const cron = parse(expression);
  const local = Temporal.Instant.fromEpochMilliseconds(after).toZonedDateTimeISO(zone).toPlainDateTime();
  // The zone's wall clock, written as if it were UTC, for croner to match against.
  let wall: Date | null = new Date(
    Date.UTC(local.year, local.month - 1, local.day, local.hour, local.minute, local.second, local.millisecond),
  );
  for (let guard = 0; guard < 1000; guard++) {
    wall = cron.nextRun(wall);
    if (wall === null) return null;
    const instant = Temporal.PlainDateTime.from({
      year: wall.getUTCFullYear(),
      month: wall.getUTCMonth() + 1,
      day: wall.getUTCDate(),
      hour: wall.getUTCHours(),
      minute: wall.getUTCMinutes(),
    }).toZonedDateTime(zone, { disambiguation: 'compatible' }).epochMilliseconds;
    // A wall time after the gap can map to an instant already passed: take the next one.
    if (instant > after) return instant;
  }
  return null;
}
