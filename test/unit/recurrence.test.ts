import { describe, expect, it } from 'vitest';
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
    expect(() => checkCron(cron)).toThrow(CronError);
    expect(() => checkCron(cron)).toThrow(message);
  });
});
