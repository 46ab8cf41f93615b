/**
 * Recurring tasks: a cron expression read in the task's IANA zone. croner matches wall-clock times,
 * each becomes an instant by the DST rule of a naive runAt, so no day is skipped and none doubled
 * (invariant 7: host settings do not matter). The check is on the request path, so it costs little
 * whatever the expression: impossible days refused from the parsed fields, the search bounded by
 * MAX_YEARS_AHEAD, the verdict kept per (expression, zone).
 * See docs/architecture.md#recurrence.
 */
import { Cron, CronPattern } from 'croner';
import { Temporal } from 'temporal-polyfill';
import { MAX_YEARS_AHEAD } from '../contract/limits.js';

export class CronError extends Error {
  override name = 'CronError';
}

const cache = new Map<string, Cron>();

/** Five fields (minute hour day month weekday), no seconds; throws CronError. */
function fieldsOf(expression: string): string[] {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5) {
    throw new CronError(`must have five fields (minute hour day-of-month month day-of-week), got ${fields.length}`);
  }
  return fields;
}

function notCron(error: unknown): string {
  return `is not a cron expression: ${(error as Error).message}`;
}

/** The parsed expression. */
function parse(expression: string): Cron {
  let cron = cache.get(expression);
  if (cron !== undefined) return cron;
  fieldsOf(expression);
  try {
    // Matched in UTC on purpose: the dates it sees are the zone's wall-clock times written as UTC.
    cron = new Cron(expression, { timezone: 'UTC', paused: true });
  } catch (error) {
    throw new CronError(notCron(error));
  }
  if (cache.size > 1000) cache.clear();
  cache.set(expression, cron);
  return cron;
}

/** The wall clock of `zone` at `at`, written as if it were UTC (what croner matches against). */
function wallClock(at: number, zone: string): number {
  const local = Temporal.Instant.fromEpochMilliseconds(at).toZonedDateTimeISO(zone).toPlainDateTime();
  return Date.UTC(local.year, local.month - 1, local.day, local.hour, local.minute, local.second, local.millisecond);
}

function yearsLater(wall: number, years: number): number {
  const date = new Date(wall);
  date.setUTCFullYear(date.getUTCFullYear() + years);
  return date.getTime();
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
/** The days of each month in a leap year (any ten years hold one) and in any other. */
const MOST_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const FEWEST_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const NTH = ['1st', '2nd', '3rd', '4th', '5th'];
/** croner's day-of-week flags: bit n-1 the nth occurrence in the month, 32 the last, 63 any. */
const LAST = 32;
const ANY = 63;

function list(items: string[], joiner: 'and' | 'or'): string {
  return items.length === 1 ? items[0]! : `${items.slice(0, -1).join(', ')} ${joiner} ${items.at(-1)}`;
}

/** Whether a day-of-week field can match `day` of month `m` in some year. */
function weekdayCanFall(flags: number, m: number, day: number): boolean {
  if (flags === ANY) return true;
  const nth = (flags & (1 << (Math.ceil(day / 7) - 1))) !== 0;
  // The last of its weekday when fewer than seven days follow it, in some year (February: one of 28 days).
  const last = (flags & LAST) !== 0 && day > FEWEST_DAYS[m]! - 7;
  return nth || last;
}

/**
 * Why the pattern's days can never come, read from its fields alone; undefined when they can, or
 * when only a search can tell. Refuses only what holds in every year, so never refuses a match:
 * any date falls on every weekday in some year, and its occurrence in the month (2nd, last) is
 * fixed by its day.
 */
export function impossibleDays(pattern: CronPattern): string | undefined {
  // Without "+", a restricted weekday matches on its own (croner's default, as Vixie cron's).
  const weekdayAlone = !pattern.starDOW && !pattern.useAndLogic;
  if (weekdayAlone || pattern.starDOM || pattern.lastDayOfMonth || pattern.lastWeekday) return undefined;
  const months = MONTHS.flatMap((_, m) => (pattern.month[m] ? [m] : []));
  // A day of the month, or the weekday nearest to it ("15W"): either way that day must exist.
  const days = pattern.day.flatMap((on, i) => (on || pattern.nearestWeekdays[i] ? [i + 1] : []));
  const fits = months.flatMap((m) => days.filter((day) => day <= MOST_DAYS[m]!).map((day) => ({ m, day })));
  if (fits.length === 0) {
    const names = months.map((m) => MONTHS[m]!);
    return `never matches any date: ${list(names, 'and')} ${names.length === 1 ? 'has' : 'have'} no day ${list(days.map(String), 'or')}`;
  }
  if (pattern.starDOW || pattern.nearestWeekdays.some(Boolean)) return undefined;
  // "+": the day must also be the weekday occurrence named ("1#2" the 2nd Monday, "5L" the last Friday).
  if (fits.some(({ m, day }) => pattern.dayOfWeek.some((flags) => weekdayCanFall(flags, m, day)))) return undefined;
  const named = new Set(
    pattern.dayOfWeek.flatMap((flags) => [...NTH.filter((_, n) => flags & (1 << n)), ...(flags & LAST ? ['last'] : [])]),
  );
  return `never matches any date: with "+" a day must also be the ${list([...named], 'or')} of its weekday in the month, and none of its days of the month ever is`;
}

interface Verdict {
  problem: string | undefined;
  /** The zone's wall clock (as UTC ms) until which the verdict holds. */
  until: number;
}

/** Requests repeat a few expressions (a batch, every item); a flood of others only evicts the oldest. */
const MAX_VERDICTS = 4096;
const verdicts = new Map<string, Verdict>();

function judge(expression: string, wallNow: number): Verdict {
  let fields: string;
  let pattern: CronPattern;
  try {
    fields = fieldsOf(expression).join(' ');
    pattern = new CronPattern(fields, 'UTC');
  } catch (error) {
    return { problem: error instanceof CronError ? error.message : notCron(error), until: Infinity };
  }
  const impossible = impossibleDays(pattern);
  if (impossible !== undefined) return { problem: impossible, until: Infinity };
  // The same fields with a year range (croner's seventh field), so the search stops there; the
  // one year past the ten tells how long a refusal holds. A UTC offset, not the UTC zone: the
  // same dates, without a time-zone lookup for each date croner looks at.
  const year = new Date(wallNow).getUTCFullYear();
  const lastYear = year + MAX_YEARS_AHEAD + 1;
  const bounded = new Cron(`0 ${fields} ${year}-${lastYear}`, { utcOffset: 0, paused: true });
  const first = bounded.nextRun(new Date(wallNow))?.getTime() ?? Date.UTC(lastYear + 1, 0, 1);
  if (first <= yearsLater(wallNow, MAX_YEARS_AHEAD)) return { problem: undefined, until: first };
  // Nothing within ten years of now; a later now brings `first` within ten years.
  return { problem: `never matches a date in the next ${MAX_YEARS_AHEAD} years`, until: yearsLater(first, -MAX_YEARS_AHEAD) };
}

/** The last wall clock checkCron read: a batch's items share their `now`, and mostly their zone. */
let lastNow = { now: Number.NaN, zone: '', wall: 0 };

/**
 * Checks that `expression` matches a date in `zone` within MAX_YEARS_AHEAD of `now` (throws
 * CronError with a message for the caller).
 */
export function checkCron(expression: string, zone: string, now: number): void {
  const key = `${zone} ${expression}`;
  if (lastNow.now !== now || lastNow.zone !== zone) lastNow = { now, zone, wall: wallClock(now, zone) };
  const wallNow = lastNow.wall;
  let verdict = verdicts.get(key);
  if (verdict === undefined || verdict.until <= wallNow) verdict = judge(expression, wallNow);
  verdicts.delete(key); // re-inserted last: the Map's order is the order of use
  verdicts.set(key, verdict);
  if (verdicts.size > MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!);
  if (verdict.problem !== undefined) throw new CronError(verdict.problem);
}

/** The first occurrence of `expression` in `zone` strictly after `after` (epoch ms), or null. */
export function nextOccurrence(expression: string, zone: string, after: number): number | null {
  const cron = parse(expression);
  // The zone's wall clock, written as if it were UTC, for croner to match against.
  let wall: Date | null = new Date(wallClock(after, zone));
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
