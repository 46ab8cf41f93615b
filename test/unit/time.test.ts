import { describe, expect, it } from 'vitest';
import { canonicalZone, latestRunAt, parseRunAt, TimeInputError, toIsoLocal, toIsoUtc } from '../../src/time.js';

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

  it('formats local times with the zone offset and milliseconds', () => {
    const ms = Date.parse('2026-12-01T02:00:00Z');
    expect(toIsoLocal(ms, 'Asia/Shanghai')).toBe('2026-12-01T10:00:00.000+08:00');
    expect(toIsoLocal(ms, 'UTC')).toBe('2026-12-01T02:00:00.000+00:00');
    expect(toIsoLocal(ms, 'America/New_York')).toBe('2026-11-30T21:00:00.000-05:00');
  });
});
