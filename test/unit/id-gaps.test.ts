import { describe, expect, it } from 'vitest';
import { IdGaps } from '../../src/timers/id-gaps.js';

describe('the gaps the id scan jumped over', () => {
  it('keeps what lies between two ids seen, and nothing for neighbours', () => {
    const gaps = new IdGaps(60_000, 100);
    gaps.jumped(0, 1, 0);
    gaps.jumped(1, 2, 0);
    gaps.jumped(2, 6, 0);
    gaps.jumped(6, 1000, 10);
    expect(gaps.ranges()).toEqual([
      [3, 5],
      [7, 999],
    ]);
  });

  it('splits a gap around the rows found in it, and drops a gap filled whole', () => {
    const gaps = new IdGaps(60_000, 100);
    gaps.jumped(10, 20, 0);
    gaps.jumped(20, 22, 0);
    gaps.jumped(22, 30, 0);
    gaps.filled([29, 21, 11, 15]);
    expect(gaps.ranges()).toEqual([
      [12, 14],
      [16, 19],
      [23, 28],
    ]);
    gaps.filled([12, 13, 14, 1, 100]);
    expect(gaps.ranges()).toEqual([
      [16, 19],
      [23, 28],
    ]);
  });

  it('forgets a gap once it is older than the watch, and the oldest past the most kept', () => {
    const gaps = new IdGaps(1000, 2);
    gaps.jumped(0, 2, 0);
    gaps.jumped(2, 4, 500);
    gaps.age(1000);
    expect(gaps.ranges()).toEqual([
      [1, 1],
      [3, 3],
    ]);
    gaps.age(1001);
    expect(gaps.ranges()).toEqual([[3, 3]]);
    gaps.jumped(4, 6, 1001);
    gaps.jumped(6, 8, 1001);
    gaps.age(1001);
    expect(gaps.ranges()).toEqual([
      [5, 5],
      [7, 7],
    ]);
  });

  it('keeps its age across a step of the wall clock', () => {
    const gaps = new IdGaps(1000, 10);
    gaps.jumped(0, 2, 0);
    gaps.shift(-5000);
    gaps.age(-4500);
    expect(gaps.size).toBe(1);
    gaps.age(-3999);
    expect(gaps.size).toBe(0);
  });
});
