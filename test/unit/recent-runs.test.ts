import { describe, expect, it } from 'vitest';
import { RecentRuns, SLOT_MS, SLOTS } from '../../src/observability/recent-runs.js';

const T0 = Date.UTC(2026, 11, 1, 2, 0, 0); // a slot boundary

describe('the ring of recent runs', () => {
  it('counts runs by outcome in the 10 s slot they started in', () => {
    const ring = new RecentRuns();
    ring.record('done', 3, T0 + 1000);
    ring.record('done', 4, T0 + 9999);
    ring.record('retry', 5, T0 + 10_000);
    ring.record('failed', 6, T0 + 25_000);
    const snap = ring.snapshot(T0 + 25_000);
    expect(snap.starts).toHaveLength(SLOTS);
    expect(snap.starts.at(-1)).toBe(T0 + 20_000);
    expect(snap.starts[1]! - snap.starts[0]!).toBe(SLOT_MS);
    expect(snap.done.slice(-3)).toEqual([2, 0, 0]);
    expect(snap.retries.slice(-3)).toEqual([0, 1, 0]);
    expect(snap.failures.slice(-3)).toEqual([0, 0, 1]);
    expect(snap.latenessP50Ms.slice(-4)).toEqual([null, 3, 5, 6]);
  });

  it('gives p50 and p99 within 5 % of the exact values', () => {
    const ring = new RecentRuns();
    const values = Array.from({ length: 1000 }, (_, i) => 1 + i * 0.37); // 1 .. 370.6 ms
    for (const value of values) ring.record('done', value, T0 + 500);
    const snap = ring.snapshot(T0 + 1000);
    const exact = (q: number) => values[Math.ceil(q * values.length) - 1]!;
    const p50 = snap.latenessP50Ms.at(-1)!;
    const p99 = snap.latenessP99Ms.at(-1)!;
    expect(p50).toBeGreaterThanOrEqual(exact(0.5) - 0.1);
    expect(p50).toBeLessThanOrEqual(exact(0.5) * 1.05);
    expect(p99).toBeGreaterThanOrEqual(exact(0.99) - 0.1);
    expect(p99).toBeLessThanOrEqual(exact(0.99) * 1.05);
  });

  it('keeps waits for a pause or a limit apart from lateness: counted and ranked among the runs that waited only', () => {
    const ring = new RecentRuns();
    ring.record('done', 2, T0 + 1000, 27_000); // a pause held it 27 s; 2 ms late after it
    ring.record('done', 3, T0 + 2000);
    ring.record('done', 4, T0 + 3000, 500);
    const snap = ring.snapshot(T0 + 3000);
    expect(snap.done.at(-1)).toBe(3);
    expect(snap.waited.at(-1)).toBe(2);
    // Lateness ranks all three runs, their waits left out.
    expect(snap.latenessP99Ms.at(-1)).toBeLessThanOrEqual(4);
    expect(snap.waitedP50Ms.at(-1)).toBeGreaterThanOrEqual(500 - 0.1);
    expect(snap.waitedP50Ms.at(-1)).toBeLessThanOrEqual(500 * 1.05);
    expect(snap.waitedP99Ms.at(-1)).toBe(27_000);
    expect(snap.waitedP99Ms.at(-2)).toBeNull();
    expect(snap.waited.at(-2)).toBe(0);
  });

  it('forgets what is older than an hour, and reuses its slots', () => {
    const ring = new RecentRuns();
    ring.record('done', 1, T0);
    const hourLater = T0 + SLOTS * SLOT_MS;
    expect(ring.snapshot(hourLater - 1).done[0]).toBe(1);
    expect(ring.snapshot(hourLater).done.reduce((a, b) => a + b, 0)).toBe(0);
    ring.record('retry', 2, hourLater); // the same slot of the ring, an hour on
    ring.record('done', 1, T0); // too old now: dropped
    const snap = ring.snapshot(hourLater);
    expect(snap.retries.at(-1)).toBe(1);
    expect(snap.done.reduce((a, b) => a + b, 0)).toBe(0);
  });
});
