/**
 * Reading and writing instants. Every conversion between a wall-clock time and an instant goes
 * through an explicit IANA zone, so nothing here depends on the process's TZ or the host locale.
 *
 * DST rule (the "compatible" disambiguation of RFC 5545 and of JavaScript's Date): a naive local
 * time that falls in a spring-forward gap is moved forward by the length of the gap
 * (02:30 on 2026-03-08 in America/New_York is 03:30 EDT); one that happens twice in a fall-back
 * overlap takes the earlier of the two (01:30 on 2026-11-01 is 01:30 EDT, -04:00).
 */
import { Temporal } from 'temporal-polyfill';
import { MAX_YEARS_AHEAD, MAX_ZONE_LENGTH } from '../contract/limits.js';

/** Epoch-ms values below this are almost surely seconds sent by mistake (before 1973-03-03). */
const SMALLEST_EPOCH_MS = 100_000_000_000;

export class TimeInputError extends Error {
  override name = 'TimeInputError';
}

/** canonicalZone's answers by name: each costs a Temporal zone lookup. */
const zones = new Map<string, string | undefined>();
const MAX_ZONES_KEPT = 1000;

/**
 * The IANA zone named by `name`, in Temporal's spelling ("asia/shanghai" → "Asia/Shanghai"),
 * or undefined when it is not one. Bare offsets ("+08:00") are refused: they carry no DST rules.
 */
export function canonicalZone(name: string): string | undefined {
  if (name.length === 0 || name.length > MAX_ZONE_LENGTH || /^[+-]/.test(name) || /^z$/i.test(name)) return undefined;
  if (zones.has(name)) return zones.get(name);
  let zone: string | undefined;
  try {
    zone = new Temporal.ZonedDateTime(0n, name).timeZoneId;
  } catch {
    zone = undefined;
  }
  // Requests name few zones again and again (a batch, every item); a flood of made-up names only refills it.
  if (zones.size >= MAX_ZONES_KEPT) zones.clear();
  zones.set(name, zone);
  return zone;
}

/** The last answer of latestRunAt: a batch's items share their `now`, and the calendar sum is not cheap. */
let latest = { now: Number.NaN, at: 0 };

/** Latest instant a task may be scheduled for: ten calendar years after `now`. */
export function latestRunAt(now: number): number {
  if (latest.now !== now) {
    const at = Temporal.Instant.fromEpochMilliseconds(now).toZonedDateTimeISO('UTC').add({ years: MAX_YEARS_AHEAD }).epochMilliseconds;
    latest = { now, at };
  }
  return latest.at;
}

/**
 * The instant (epoch ms) that `runAt` names. Accepted: ISO-8601 with `Z` or an offset; a naive
 * local date-time ("2026-12-01 10:00:00" or with `T`), read in `zone`; epoch milliseconds as an
 * integer. Sub-millisecond digits are dropped (the table keeps milliseconds).
 */
export function parseRunAt(runAt: string | number, zone: string, now: number): number {
  let ms: number;
  if (typeof runAt === 'number') {
    if (!Number.isSafeInteger(runAt)) throw new TimeInputError('must be an integer number of epoch milliseconds');
    if (runAt < SMALLEST_EPOCH_MS) {
      throw new TimeInputError(`${runAt} looks like epoch seconds; send epoch milliseconds`);
    }
    ms = runAt;
  } else {
    ms = parseIsoString(runAt, zone);
  }
  if (ms < 0) throw new TimeInputError('must not be before 1970-01-01T00:00:00Z');
  if (ms > latestRunAt(now)) {
    throw new TimeInputError(`must not be more than ${MAX_YEARS_AHEAD} years ahead`);
  }
  return ms;
}

/** A time of day followed by a numeric UTC offset, at the end of an ISO-8601 text: `10:00:00+08:00`. */
const TRAILING_OFFSET = /\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?([+-])(\d{2})(?::?(\d{2}))?$/;

/**
 * The zone of a task whose request names none but whose runAt carries an offset (`+08:00`): the
 * fallback (TIMEZONE) when its offset at `ms` is that one, else the fixed zone of a whole-hour
 * offset (`Etc/GMT-8`: IANA's Etc names count the other way), else the fallback (`+05:30` has
 * no IANA name of its own). So runAtLocal shows the time the shop wrote.
 */
export function zoneOfOffset(text: string, ms: number, fallback: string): string {
  const match = TRAILING_OFFSET.exec(text.trim());
  if (match === null) return fallback;
  const [, sign, hours, minutes = '00'] = match;
  const offset = `${sign}${hours}:${minutes}`;
  if (toIsoLocal(ms, fallback).endsWith(offset)) return fallback;
  const whole = Number(hours);
  if (minutes !== '00' || whole === 0 || (sign === '+' && whole > 14) || (sign === '-' && whole > 12)) return fallback;
  return `Etc/GMT${sign === '+' ? '-' : '+'}${whole}`;
}

function parseIsoString(text: string, zone: string): number {
  const value = text.trim();
  if (value.length === 0 || value.length > 64) throw new TimeInputError('must be an ISO-8601 date-time');
  if (value.includes('[')) {
    throw new TimeInputError('zone annotations such as [Asia/Shanghai] are not accepted; use the timezone field');
  }
  if (/^\d+$/.test(value)) {
    throw new TimeInputError('a string must be an ISO-8601 date-time; send epoch milliseconds as a JSON integer');
  }
  return fastInstant(value, zone) ?? temporalInstant(value, zone);
}

/** The instant a trimmed ISO-8601 text names, read by Temporal: every shape it accepts. */
export function temporalInstant(value: string, zone: string): number {
  // An instant first: PlainDateTime.from would silently drop an offset.
  try {
    return Temporal.Instant.from(value).epochMilliseconds;
  } catch {
    // no offset: a naive local time, read below
  }
  let local: Temporal.PlainDateTime;
  try {
    local = Temporal.PlainDateTime.from(value, { overflow: 'reject' });
  } catch {
    throw new TimeInputError(
      `${JSON.stringify(value)} is not an ISO-8601 date-time (e.g. 2026-12-01T10:00:00+08:00 or 2026-12-01 10:00:00)`,
    );
  }
  return local.toZonedDateTime(zone, { disambiguation: 'compatible' }).epochMilliseconds;
}

/**
 * The common shapes of runAt read without Temporal (whose polyfill costs tens of microseconds a
 * call, which a batch of 1,000 items feels): `YYYY-MM-DD[T ]HH:MM[:SS[.fraction]]` followed by `Z`
 * or `±HH:MM`, or with neither when the zone is UTC. Anything else, or anything doubtful (a leap
 * second, `-00:00`, a year outside 1900..2999), answers undefined and is left to Temporal, so
 * the answer is always the one Temporal gives (time.test.ts compares the two on many inputs).
 */
export function fastInstant(value: string, zone: string): number | undefined {
  const m = ISO_SHAPE.exec(value);
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, fraction, z, sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = s === undefined ? 0 : Number(s);
  if (year < 1900 || year > 2999 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (sign !== undefined) {
    const hours = Number(oh);
    const minutes = Number(om);
    if (hours > 23 || minutes > 59 || (sign === '-' && hours === 0 && minutes === 0)) return undefined;
    offsetMinutes = (sign === '-' ? -1 : 1) * (hours * 60 + minutes);
  } else if (z === undefined && zone !== 'UTC') {
    return undefined;
  }
  const ms = fraction === undefined ? 0 : Number((fraction + '00').slice(0, 3));
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMinutes * 60_000;
}

const ISO_SHAPE = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:(Z)|([+-])(\d{2}):(\d{2}))?$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** ISO-8601 UTC with milliseconds: 2026-12-01T02:00:00.000Z. */
export function toIsoUtc(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The same instant with `zone`'s offset: 2026-12-01T10:00:00.000+08:00. A zone that is not one
 * (a row someone inserted by hand) reads as UTC rather than failing the whole answer.
 */
export function toIsoLocal(ms: number, zone: string): string {
  const name = canonicalZone(zone) ?? 'UTC';
  let span = offsetSpans.get(name);
  if (span === undefined || ms < span.from || ms >= span.until) {
    span = offsetSpanAt(ms, name);
    if (offsetSpans.size >= MAX_ZONES_KEPT) offsetSpans.clear();
    offsetSpans.set(name, span);
  }
  // toISOString writes years 0000–9999 as Temporal does; an offset with seconds (local mean time,
  // before 1900 or so) Temporal prints rounded to the minute: both left to Temporal.
  if (span.offsetMs % 60_000 !== 0 || ms < FOUR_DIGIT_YEARS.from || ms > FOUR_DIGIT_YEARS.until) return temporalIsoLocal(ms, name);
  return `${new Date(ms + span.offsetMs).toISOString().slice(0, -1)}${span.offset}`;
}

/** toIsoLocal by Temporal alone, each time: what the fast path must answer (tested side by side). */
export function temporalIsoLocal(ms: number, zone: string): string {
  const zoned = Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(canonicalZone(zone) ?? 'UTC');
  return zoned.toString({ fractionalSecondDigits: 3, timeZoneName: 'never' });
}

/**
 * Each zone's offset over the span that holds the last instant written in it, from a transition
 * (or that instant) to the next: toIsoLocal then needs no Temporal conversion per instant, which
 * cost a lease answer a few percent of the server's time (each task carries runAtLocal).
 */
interface OffsetSpan {
  from: number;
  until: number;
  offsetMs: number;
  /** As Temporal writes it: +08:00. */
  offset: string;
}
const offsetSpans = new Map<string, OffsetSpan>();
/** Instants whose local time, in any zone, has a year of four digits (a day's margin each side). */
const FOUR_DIGIT_YEARS = { from: Date.UTC(1000, 0, 2), until: Date.UTC(9999, 11, 30) };

function offsetSpanAt(ms: number, zone: string): OffsetSpan {
  const zoned = Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(zone);
  const offsetMs = zoned.offsetNanoseconds / 1e6;
  // 'previous' is the transition strictly before: at a transition itself, the span starts there.
  const previous = zoned.getTimeZoneTransition('previous');
  const from = previous !== null && previous.offsetNanoseconds === zoned.offsetNanoseconds ? previous.epochMilliseconds : ms;
  const next = zoned.getTimeZoneTransition('next');
  return { from, until: next === null ? Number.POSITIVE_INFINITY : next.epochMilliseconds, offsetMs, offset: zoned.offset };
}
