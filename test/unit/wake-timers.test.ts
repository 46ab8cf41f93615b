/** The wake-up timers of the type limits: one per key, the first asked for kept, cleared on stop. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WakeTimers } from '../../src/dispatch/wake-timers.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
});

afterEach(() => {
  vi.useRealTimers();
});

describe('wake-up timers', () => {
  it('wake a key once at its time, and keep the timer a key has', () => {
    const timers = new WakeTimers();
    const woken: string[] = [];
    timers.set('a', 100, () => woken.push('a'));
    timers.set('a', 10, () => woken.push('a again'));
    timers.set('b', 50, () => woken.push('b'));
    vi.advanceTimersByTime(49);
    expect(woken).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(woken).toEqual(['b']);
    vi.advanceTimersByTime(50);
    expect(woken).toEqual(['b', 'a']);
    expect(timers.size).toBe(0);
    // Once fired, the key may get a new timer.
    timers.set('a', 5, () => woken.push('a later'));
    vi.advanceTimersByTime(5);
    expect(woken).toEqual(['b', 'a', 'a later']);
  });

  it('never wake at once for a delay of zero or less: at least a millisecond later', () => {
    const timers = new WakeTimers();
    const woken: number[] = [];
    timers.set('a', -20, () => woken.push(Date.now()));
    const start = Date.now();
    vi.advanceTimersByTime(0);
    expect(woken).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(woken).toEqual([start + 1]);
  });

  it('wake nothing once cleared', () => {
    const timers = new WakeTimers();
    const woken: string[] = [];
    timers.set('a', 10, () => woken.push('a'));
    timers.clear();
    vi.advanceTimersByTime(100);
    expect(woken).toEqual([]);
    expect(timers.has('a')).toBe(false);
  });
});
