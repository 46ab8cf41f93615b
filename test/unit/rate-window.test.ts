/** The rate window of the type limits: at most R starts in any one-second window, whatever order the starts come in. */
import { describe, expect, it } from 'vitest';
import { fitsWindow, nextRoomAt, roomInWindow, StartTimes } from '../../src/dispatch/rate-window.js';

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

describe('the room a rate window leaves', () => {
  it('counts down the starts of the last second, at least one while one more fits, none when it does not', () => {
    expect(roomInWindow([], 0, 5)).toBe(5);
    expect(roomInWindow([0, 10], 20, 5)).toBe(3);
    expect(roomInWindow([0, 10, 20, 30, 40], 50, 5)).toBe(0);
    // A rate under one: one start fits after the gap, never more.
    expect(roomInWindow([0], 2000, 0.5)).toBe(1);
    expect(roomInWindow([0], 1000, 0.5)).toBe(0);
  });

  it('wakes a refused start once the oldest start of its span has left it', () => {
    expect(nextRoomAt([100, 200, 300], 500, 3)).toBe(1101);
    expect(nextRoomAt([0], 500, 0.5)).toBe(2001);
    // Nothing in the span (the starts are older): at once.
    expect(nextRoomAt([-5000], 500, 3)).toBe(501);
  });

  it('a start at nextRoomAt fits the window', () => {
    const starts = [100, 200, 300];
    expect(fitsWindow(starts, 900, 3)).toBe(false);
    expect(fitsWindow(starts, nextRoomAt(starts, 900, 3), 3)).toBe(true);
  });
});

describe('the start times per group key', () => {
  it('keeps them sorted whatever order they come in, and forgets one that did not happen', () => {
    const starts = new StartTimes();
    for (const at of [300, 100, 200]) starts.record('k', at, 5);
    expect(starts.of('k', 300, 5)).toEqual([100, 200, 300]);
    starts.forget('k', 200);
    expect(starts.of('k', 300, 5)).toEqual([100, 300]);
    expect(starts.of('other', 300, 5)).toEqual([]);
  });

  it('drops what is older than two spans, and the key once it has none', () => {
    const starts = new StartTimes();
    starts.record('k', 0, 5);
    starts.record('k', 1500, 5);
    expect(starts.of('k', 2000, 5)).toEqual([1500]);
    expect(starts.of('k', 3500, 5)).toEqual([]);
    expect(starts.size).toBe(0);
    // A slow rate keeps its starts longer: two of its 4 s spans.
    starts.record('slow', 0, 0.25);
    expect(starts.of('slow', 7999, 0.25)).toEqual([0]);
  });
});
