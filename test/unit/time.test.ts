import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalZone,
  fastInstant,
  latestRunAt,
  parseRunAt,
  temporalInstant,
  TimeInputError,
  temporalIsoLocal,
  toIsoLocal,
  toIsoUtc,
} from '../../src/time/zones.js';

const NOW = Date.parse('2026-11-29T12:00:00Z');

describe('reading runAt', () => {
  it('reads a naive local time in the zone it is given', () => {
    expect(toIsoUtc(parseRunAt('2026-12-01 10:00:00', 'Asia/Shanghai', NOW))).toBe('2026-12-01T02:00:00.000Z');
    expect(toIsoUtc(parseRunAt('2026-12-01T10:00:00', 'America/New_York', NOW))).toBe('2026-12-01T15:00:00.000Z');
    expect(toIsoUtc(parseRunAt('2026-12-01 10:00:00.250', 'UTC', NOW))).toBe('2026-12-01T10:00:00.250Z');
  });

  it('takes an offset or Z at its word, whatever the zone', () => {
    expect(toIsoUtc(parseRunAt('2026-12-01T10:00:00+08:00', 'America/New_York', NOW))).toBe('2026-12-01T02:00:00.000Z');
    expect(toIsoUtc(parseRunAt('2026-12-01T02:00:00Z', 'Asia/Shanghai', NOW))).toBe('2026-12-01T02:00:00.000Z');
  });

  it('takes epoch milliseconds as they are', () => {
    expect(parseRunAt(1_796_090_400_000, 'Asia/Shanghai', NOW)).toBe(1_796_090_400_000);
  });

  it('drops digits below the millisecond', () => {
    expect(toIsoUtc(parseRunAt('2026-12-01T02:00:00.123456789Z', 'UTC', NOW))).toBe('2026-12-01T02:00:00.123Z');
  });

  it('moves a time in the spring-forward gap forward by the gap (America/New_York)', () => {
    // 02:30 does not exist on 2026-03-08: it is read as 03:30 EDT.
    const ms = parseRunAt('2026-03-08 02:30:00', 'America/New_York', NOW);
    expect(toIsoUtc(ms)).toBe('2026-03-08T07:30:00.000Z');
    expect(toIsoLocal(ms, 'America/New_York')).toBe('2026-03-08T03:30:00.000-04:00');
  });

  it('takes the earlier of the two times in the fall-back overlap (America/New_York)', () => {
    // 01:30 happens twice on 2026-11-01: the first one, EDT (-04:00), is chosen.
    const ms = parseRunAt('2026-11-01 01:30:00', 'America/New_York', NOW);
    expect(toIsoUtc(ms)).toBe('2026-11-01T05:30:00.000Z');
    expect(toIsoLocal(ms, 'America/New_York')).toBe('2026-11-01T01:30:00.000-04:00');
  });

  it.each([
    ['2026-13-01 10:00:00', 'is not an ISO-8601 date-time'],
    ['2026-02-30 10:00:00', 'is not an ISO-8601 date-time'],
    ['tomorrow', 'is not an ISO-8601 date-time'],
    ['', 'must be an ISO-8601 date-time'],
    ['1796090400000', 'send epoch milliseconds as a JSON integer'],
    ['2026-12-01T10:00:00[Asia/Shanghai]', 'use the timezone field'],
  ])('refuses %j', (input, message) => {
    expect(() => parseRunAt(input, 'UTC', NOW)).toThrow(TimeInputError);
    expect(() => parseRunAt(input, 'UTC', NOW)).toThrow(message);
  });

  it('refuses epoch seconds sent by mistake, fractions and negative numbers', () => {
    expect(() => parseRunAt(1_796_090_400, 'UTC', NOW)).toThrow('looks like epoch seconds');
    expect(() => parseRunAt(1.5e12 + 0.5, 'UTC', NOW)).toThrow('integer');
    expect(() => parseRunAt(-1, 'UTC', NOW)).toThrow('looks like epoch seconds');
  });

  it('accepts the past (the task runs at once) but not more than ten years ahead', () => {
    expect(parseRunAt('2001-01-01T00:00:00Z', 'UTC', NOW)).toBe(Date.parse('2001-01-01T00:00:00Z'));
    expect(latestRunAt(NOW)).toBe(Date.parse('2036-11-29T12:00:00Z'));
    expect(parseRunAt('2036-11-29T12:00:00Z', 'UTC', NOW)).toBe(latestRunAt(NOW));
    expect(() => parseRunAt('2036-11-29T12:00:00.001Z', 'UTC', NOW)).toThrow('10 years');
    expect(() => parseRunAt('1969-12-31T23:59:59Z', 'UTC', NOW)).toThrow('1970');
  });
});

describe('the fast reading of runAt', () => {
  const pad = (n: number, width: number) => String(n).padStart(width, '0');
  /** ISO-ish texts near and off the shapes the fast path takes: some valid, some not. */
  const text = fc
    .record({
      year: fc.oneof(fc.integer({ min: 1969, max: 2040 }), fc.integer({ min: 0, max: 9999 })),
      month: fc.integer({ min: 0, max: 13 }),
      day: fc.integer({ min: 0, max: 32 }),
      hour: fc.integer({ min: 0, max: 25 }),
      minute: fc.integer({ min: 0, max: 60 }),
      second: fc.option(fc.integer({ min: 0, max: 61 })),
      fraction: fc.option(fc.stringMatching(/^[0-9]{1,10}$/)),
      separator: fc.constantFrom('T', ' ', 't', '_'),
      zone: fc.oneof(
        fc.constantFrom('', 'Z', 'z', '+00:00', '-00:00', '+0800', '+08'),
        fc
          .tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 24 }), fc.integer({ min: 0, max: 60 }))
          .map(([sign, h, m]) => `${sign}${pad(h, 2)}:${pad(m, 2)}`),
      ),
    })
    .map(
      (t) =>
        `${pad(t.year, 4)}-${pad(t.month, 2)}-${pad(t.day, 2)}${t.separator}${pad(t.hour, 2)}:${pad(t.minute, 2)}` +
        `${t.second === null ? '' : `:${pad(t.second, 2)}${t.fraction === null ? '' : `.${t.fraction}`}`}${t.zone}`,
    );
  const zone = fc.constantFrom('UTC', 'America/New_York', 'Asia/Shanghai', 'Europe/Berlin', 'Australia/Lord_Howe');
  const slow = (value: string, in_: string) => {
    try {
      return temporalInstant(value, in_);
    } catch (error) {
      return error instanceof TimeInputError ? 'refused' : error;
    }
  };

  it('answers what Temporal answers, whenever it answers', () => {
    fc.assert(
      fc.property(text, zone, (value, in_) => {
        const fast = fastInstant(value, in_);
        if (fast !== undefined) expect(fast, `${value} in ${in_}`).toBe(slow(value, in_));
      }),
      { numRuns: 20_000 },
    );
  });

  it('answers the common shapes itself: epoch-like ISO with Z or an offset, naive in UTC', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.parse('1970-01-01T00:00:00Z'), max: Date.parse('2099-12-31T23:59:59.999Z') }),
        fc.integer({ min: -12 * 60, max: 14 * 60 }).filter((m) => m !== 0),
        (ms, offset) => {
          const iso = new Date(ms).toISOString();
          expect(fastInstant(iso, 'America/New_York')).toBe(ms);
          expect(fastInstant(iso.replace('Z', ''), 'UTC')).toBe(ms);
          const local = new Date(ms + offset * 60_000).toISOString().replace('Z', '');
          const sign = offset < 0 ? '-' : '+';
          const withOffset = `${local}${sign}${pad(Math.floor(Math.abs(offset) / 60), 2)}:${pad(Math.abs(offset) % 60, 2)}`;
          expect(fastInstant(withOffset, 'Asia/Shanghai')).toBe(ms);
          expect(slow(withOffset, 'Asia/Shanghai')).toBe(ms);
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it('leaves naive times in a zone with DST to Temporal, and parseRunAt still reads them by the DST rule', () => {
    for (const value of ['2026-03-08 02:30:00', '2026-11-01 01:30:00', '2026-03-08T01:59:59.999', '2026-11-01T02:00:00']) {
      expect(fastInstant(value, 'America/New_York')).toBeUndefined();
      expect(parseRunAt(value, 'America/New_York', NOW)).toBe(temporalInstant(value, 'America/New_York'));
    }
  });
});

describe('zones', () => {
  it('accepts IANA names in any case and answers their spelling', () => {
    expect(canonicalZone('Asia/Shanghai')).toBe('Asia/Shanghai');
    expect(canonicalZone('asia/shanghai')).toBe('Asia/Shanghai');
    expect(canonicalZone('UTC')).toBe('UTC');
    expect(canonicalZone('Etc/GMT-8')).toBe('Etc/GMT-8');
  });

  it('refuses unknown names and bare offsets', () => {
    for (const name of ['Mars/Olympus', '+08:00', '-05:00', 'Z', '', 'Asia/Shanghai/x', 'x'.repeat(65)]) {
      expect(canonicalZone(name), name).toBeUndefined();
    }
  });

  it('writes local times as Temporal does, across transitions and in any order', () => {
    const zones = [
      'UTC',
      'America/New_York',
      'Asia/Shanghai',
      'Europe/Berlin',
      'Australia/Lord_Howe',
      'Asia/Kolkata',
      'America/St_Johns',
      'Not/AZone',
    ];
    // Around New York's 2026 transitions (to the millisecond), then anywhere from 1850 to 2200.
    const transitions = [Date.parse('2026-03-08T07:00:00Z'), Date.parse('2026-11-01T06:00:00Z')];
    const near = fc.tuple(fc.constantFrom(...transitions), fc.integer({ min: -3_600_000, max: 3_600_000 })).map(([at, d]) => at + d);
    const anywhere = fc.integer({ min: Date.UTC(1850, 0, 1), max: Date.UTC(2200, 0, 1) });
    fc.assert(
      fc.property(fc.oneof(near, anywhere, fc.constantFrom(...transitions)), fc.constantFrom(...zones), (ms, zone) => {
        expect(toIsoLocal(ms, zone), `${ms} in ${zone}`).toBe(temporalIsoLocal(ms, zone));
      }),
      { numRuns: 20_000 },
    );
  });

  it('formats local times with the zone offset and milliseconds', () => {
    const ms = Date.parse('2026-12-01T02:00:00Z');
    expect(toIsoLocal(ms, 'Asia/Shanghai')).toBe('2026-12-01T10:00:00.000+08:00');
    expect(toIsoLocal(ms, 'UTC')).toBe('2026-12-01T02:00:00.000+00:00');
    expect(toIsoLocal(ms, 'America/New_York')).toBe('2026-11-30T21:00:00.000-05:00');
  });
});
