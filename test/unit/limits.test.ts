/** The rate window of the type limits: at most R starts in any one-second window, whatever order the starts come in. */
import { describe, expect, it } from 'vitest';
import { fitsWindow } from '../../src/dispatch/limits.js';

/** The most starts in any window [t, t + 1 s). */
function busiest(starts: number[]): number {
  return Math.max(0, ...starts.map((at) => starts.filter((other) => other >= at && other < at + 1000).length));
}

describe('the rate window', () => {
  it('lets R starts through in a second and refuses the next until the first leaves the window', () => {
    const starts: number[] = [];
    for (const at of [0, 10, 20, 30, 40]) {
      expect(fitsWindow(starts, at, 5)).toBe(true);
      starts.push(at);
    }
    expect(fitsWindow(starts, 999, 5)).toBe(false);
    expect(fitsWindow(starts, 1000, 5)).toBe(true);
  });

  it('counts the windows after a start too: a start read earlier than the last one cannot crowd a window', () => {
    // A batch that read its time at 500 takes its turn after starts at 600…1400.
    const starts = [600, 800, 1000, 1200, 1400];
    expect(fitsWindow(starts, 500, 5)).toBe(false);
    expect(fitsWindow(starts, -500, 5)).toBe(true);
  });

  it('never lets a window hold more than R, over many starts in any order', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (const rate of [1, 3, 5, 20]) {
      const starts: number[] = [];
      for (let i = 0; i < 2000; i++) {
        const at = Math.floor(random() * 10_000);
        if (
          fitsWindow(
            [...starts].sort((a, b) => a - b),
            at,
            rate,
          )
        )
          starts.push(at);
      }
      expect(busiest(starts)).toBeLessThanOrEqual(rate);
      expect(busiest(starts)).toBe(rate);
    }
  });

  it('spaces the starts of a rate under one per second', () => {
    expect(fitsWindow([0], 1999, 0.5)).toBe(false);
    expect(fitsWindow([0], 2000, 0.5)).toBe(true);
  });
});
