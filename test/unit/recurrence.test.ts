import { Cron } from 'croner';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkCron, CronError, nextOccurrence } from '../../src/time/recurrence.js';
import { toIsoLocal } from '../../src/time/zones.js';

/** The next `count` occurrences after `from`, in the zone's local time. */
function occurrences(cron: string, zone: string, from: string, count: number): string[] {
  const out: string[] = [];
  let at = Date.parse(from);
  for (let i = 0; i < count; i++) {
    at = nextOccurrence(cron, zone, at)!;
    out.push(toIsoLocal(at, zone));
  }
  return out;
}

describe('recurrence', () => {
  it('runs every day at 00:00 Asia/Shanghai', () => {
    expect(occurrences('0 0 * * *', 'Asia/Shanghai', '2026-11-29T12:00:00Z', 3)).toEqual([
      '2026-11-30T00:00:00.000+08:00',
      '2026-12-01T00:00:00.000+08:00',
      '2026-12-02T00:00:00.000+08:00',
    ]);
  });

  it('skips no day and doubles none when New York springs forward (02:30 does not exist)', () => {
    expect(occurrences('30 2 * * *', 'America/New_York', '2026-03-06T12:00:00Z', 4)).toEqual([
      '2026-03-07T02:30:00.000-05:00',
      '2026-03-08T03:30:00.000-04:00', // the gap: moved forward by its length, as a naive runAt is
      '2026-03-09T02:30:00.000-04:00',
      '2026-03-10T02:30:00.000-04:00',
    ]);
  });

  it('skips no day and doubles none when New York falls back (01:30 happens twice)', () => {
    expect(occurrences('30 1 * * *', 'America/New_York', '2026-10-30T12:00:00Z', 4)).toEqual([
      '2026-10-31T01:30:00.000-04:00',
      '2026-11-01T01:30:00.000-04:00', // once: the earlier of the two
      '2026-11-02T01:30:00.000-05:00',
      '2026-11-03T01:30:00.000-05:00',
    ]);
  });

  it('follows weekdays and months in the zone, not in UTC', () => {
    // 08:00 on Mondays in Shanghai is Sunday 00:00 UTC.
    expect(occurrences('0 8 * * 1', 'Asia/Shanghai', '2026-11-29T12:00:00Z', 2)).toEqual([
      '2026-11-30T08:00:00.000+08:00',
      '2026-12-07T08:00:00.000+08:00',
    ]);
  });

  it.each([
    ['* * * *', 'must have five fields'],
    ['0 0 * * * *', 'must have five fields'],
    ['61 * * * *', 'is not a cron expression'],
    ['0 0 31 2 *', 'never matches'],
    ['every day', 'must have five fields'],
  ])('refuses %j', (cron, message) => {
    expect(() => checkCron(cron, 'UTC', NOW)).toThrow(CronError);
    expect(() => checkCron(cron, 'UTC', NOW)).toThrow(message);
  });
});

const NOW = Date.parse('2026-12-01T10:00:00Z');

/** What checkCron says of `cron` (undefined: accepted), and how many searches it ran for it. */
function check(cron: string, zone = 'UTC', now = NOW): { problem: string | undefined; searches: number } {
  const search = vi.spyOn(Cron.prototype, 'nextRun');
  try {
    checkCron(cron, zone, now);
    return { problem: undefined, searches: search.mock.calls.length };
  } catch (error) {
    if (!(error instanceof CronError)) throw error;
    return { problem: error.message, searches: search.mock.calls.length };
  } finally {
    search.mockRestore();
  }
}

describe('checking a cron expression', () => {
  afterEach(() => vi.restoreAllMocks());

  it.each([
    ['0 0 31 2,4,6,9,11 *', 'February, April, June, September and November have no day 31'],
    ['59 23 31 4 *', 'April has no day 31'],
    ['0 12 31 6 *', 'June has no day 31'],
    ['0 0 31 9 *', 'September has no day 31'],
    ['0 0 31 11 *', 'November has no day 31'],
    ['0 0 30 2 *', 'February has no day 30'],
    ['0 0 31 2 *', 'February has no day 31'],
    ['0 0 30,31 2 *', 'February has no day 30 or 31'],
    ['0 0 30-31 feb *', 'February has no day 30 or 31'],
    ['0 0 31W 4 *', 'April has no day 31'],
    ['0 0 30 2 +1', 'February has no day 30'],
    ['0 0 1-7 * +1#2', 'the 2nd of its weekday'],
    ['0 0 8-14 * +MON#1,FRI#3', 'the 1st or 3rd of its weekday'],
    ['0 0 1-24 1 +5L', 'the last of its weekday'],
    ['0 0 21 2 +1L', 'the last of its weekday'],
  ])('refuses %j from its fields alone, before any search', (cron, message) => {
    const { problem, searches } = check(cron);
    expect(problem).toMatch(/^never matches any date: /);
    expect(problem).toContain(message);
    expect(searches).toBe(0);
  });

  it.each([
    ['0 0 29 2 *', 'every 29 February (the next in 2028)'],
    ['30 8 31 1-12 *', 'the 31st of the months that have one'],
    ['0 0 31 2 1', 'a weekday without "+" matches on its own: the Mondays of February'],
    ['0 0 22 2 +1L', '22 February is the last Monday in a year that is not leap (2027)'],
    ['0 0 L 2 *', 'the last day of February'],
    ['0 0 13 * +5', 'Friday the 13th'],
    ['0 0 29-31 * +1#5', 'a fifth Monday'],
  ])('accepts %j: %s', (cron) => {
    expect(check(cron).problem).toBeUndefined();
  });

  it('searches from now, up to the ten years a task may be ahead', () => {
    // 29 February on a Monday: 2016, then 2044.
    expect(check('0 9 29 2 +1').problem).toBe('never matches a date in the next 10 years');
    expect(check('0 9 29 2 +1', 'UTC', Date.parse('2034-03-01T00:00:00Z')).problem).toBeUndefined();
    expect(check('0 9 29 2 +1', 'UTC', Date.parse('2044-03-01T00:00:00Z')).problem).toBe('never matches a date in the next 10 years');
  });

  it('costs one search for "* * * * *", and none the second time (per expression and zone)', () => {
    expect(check('* * * * *')).toEqual({ problem: undefined, searches: 1 });
    expect(check('* * * * *')).toEqual({ problem: undefined, searches: 0 });
    expect(check('* * * * *', 'Asia/Shanghai')).toEqual({ problem: undefined, searches: 1 });
    expect(check('* * * * *', 'Asia/Shanghai', NOW + 1000)).toEqual({ problem: undefined, searches: 0 });
    // A refusal is kept too.
    expect(check('0 10 29 2 +1').searches).toBe(1);
    expect(check('0 10 29 2 +1')).toEqual({ problem: 'never matches a date in the next 10 years', searches: 0 });
  });

  it('searches again once the match it found has passed', () => {
    expect(check('0 0 1 1 *')).toEqual({ problem: undefined, searches: 1 });
    expect(check('0 0 1 1 *', 'UTC', Date.parse('2026-12-31T23:59:59Z')).searches).toBe(0);
    expect(check('0 0 1 1 *', 'UTC', Date.parse('2027-01-01T00:00:00Z')).searches).toBe(1);
  });
});
