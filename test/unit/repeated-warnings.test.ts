/** Repeated warnings summarised per interval. Fake timers fake only Date, setTimeout and clearTimeout. */
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RepeatedWarnings } from '../../src/observability/repeated-warnings.js';

function capture() {
  const lines: Record<string, any>[] = [];
  // A plain object as the stream: pino writes each line to it synchronously.
  const stream = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, any>) };
  return { lines, log: pino({ level: 'debug' }, stream) };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
});

afterEach(() => {
  vi.useRealTimers();
});

describe('repeated warnings', () => {
  it('log the first at once, then one line per interval with the count and the last fields', () => {
    const { lines, log } = capture();
    const warnings = new RepeatedWarnings(log, 5000);
    // 1,000 failures over 12 s, one every 12 ms.
    for (let i = 1; i <= 1000; i++) {
      warnings.warn('db', { error: `failure ${i}` }, 'database failed');
      vi.advanceTimersByTime(12);
    }
    expect(lines.length).toBe(3); // the first, then a summary at 5 s and one at 10 s
    expect(lines[0]).toMatchObject({ level: 40, error: 'failure 1', msg: 'database failed' });
    expect(lines[1]).toMatchObject({ level: 40, repeated: expect.any(Number), intervalMs: 5000 });
    expect(lines[1]!.msg).toMatch(/^database failed \(\d+ more like it within 5 s; the last shown\)$/);
    warnings.flush();
    expect(lines.length).toBe(4);
    expect(lines[3]).toMatchObject({ error: 'failure 1000' });
    expect(lines.slice(1).reduce((sum, line) => sum + line.repeated, 0)).toBe(999);
  });

  it('count each kind on its own, and take the worst level of an interval', () => {
    const { lines, log } = capture();
    const warnings = new RepeatedWarnings(log, 5000);
    warnings.warn('a', {}, 'a failed');
    warnings.warn('b', {}, 'b failed');
    warnings.warn('a', {}, 'a failed', 'error');
    warnings.warn('a', {}, 'a failed');
    expect(lines.map((line) => line.msg)).toEqual(['a failed', 'b failed']);
    vi.advanceTimersByTime(5000);
    expect(lines.length).toBe(3);
    expect(lines[2]).toMatchObject({ level: 50, repeated: 2 });
  });

  it('log at once again after a quiet interval, and say nothing when nothing repeated', () => {
    const { lines, log } = capture();
    const warnings = new RepeatedWarnings(log, 5000);
    warnings.warn('a', { n: 1 }, 'a failed');
    vi.advanceTimersByTime(5000); // nothing repeated: no summary
    expect(lines.length).toBe(1);
    vi.advanceTimersByTime(60_000);
    warnings.warn('a', { n: 2 }, 'a failed');
    expect(lines.map((line) => line.n)).toEqual([1, 2]);
    warnings.flush();
    expect(lines.length).toBe(2);
    expect(vi.getTimerCount()).toBe(0);
  });
});
