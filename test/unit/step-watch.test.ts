import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/time/clock.js';
import { CHECK_INTERVAL_MS, StepWatch, STEP_THRESHOLD_MS } from '../../src/time/step-watch.js';
import { Timers } from '../../src/timers/timers.js';

const MINUTE = 60_000;

/**
 * Date, the timers and performance.now are faked: advancing time moves the wall clock and the
 * monotonic clock together, vi.setSystemTime steps the wall clock alone — a wall-clock step.
 */
describe('clock watch', () => {
  let fired: { id: number; at: number }[];
  let timers: Timers;
  let watch: StepWatch;
  let steps: number[];
  let refills: number;

  beforeEach(() => {
    vi.useFakeTimers({
      toFake: ['Date', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'],
      now: Date.parse('2026-11-29T00:00:00Z'),
    });
    fired = [];
    steps = [];
    refills = 0;
    timers = new Timers(systemClock, (id) => fired.push({ id, at: Date.now() }));
    watch = new StepWatch({
      clock: systemClock,
      log: pino({ level: 'silent' }),
      timers,
      scheduler: {
        followClockStep: (stepMs) => steps.push(stepMs),
        refillSoon: () => refills++,
      },
    });
    watch.start();
  });

  afterEach(() => {
    watch.stop();
    timers.disarmAll();
    vi.useRealTimers();
  });

  it('a forward step of 6 minutes runs the tasks it made overdue at once, in runAt order', () => {
    const now = Date.now();
    // Armed 5 minutes ahead, in an order that is not runAt order.
    const runAts = Array.from({ length: 20 }, (_, i) => now + 5 * MINUTE + ((i * 7) % 20) * 10);
    runAts.forEach((runAt, i) => timers.arm(i + 1, runAt));
    timers.arm(99, now + 7 * MINUTE); // still in the future after the step

    vi.setSystemTime(now + 6 * MINUTE);
    vi.advanceTimersByTime(CHECK_INTERVAL_MS);

    expect(steps).toHaveLength(1);
    expect(Math.abs(steps[0]! - 6 * MINUTE)).toBeLessThanOrEqual(1);
    expect(fired.map((f) => f.id).sort((a, b) => a - b)).toEqual(runAts.map((_, i) => i + 1));
    const firedRunAts = fired.map((f) => runAts[f.id - 1]!);
    expect(firedRunAts).toEqual([...firedRunAts].sort((a, b) => a - b));
    // Handed over within one check of the step.
    expect(Math.max(...fired.map((f) => f.at))).toBeLessThanOrEqual(now + 6 * MINUTE + CHECK_INTERVAL_MS);
    // The one not yet due is re-armed for its time by the new clock, not the old delay.
    expect(timers.runAtOf(99)).toBe(now + 7 * MINUTE);
    vi.advanceTimersByTime(MINUTE - CHECK_INTERVAL_MS - 1);
    expect(fired.map((f) => f.id)).not.toContain(99);
    vi.advanceTimersByTime(1);
    expect(fired.at(-1)).toEqual({ id: 99, at: now + 7 * MINUTE });
  });

  it('without the watch, the same step leaves the tasks late by up to the step', () => {
    watch.stop();
    const now = Date.now();
    timers.arm(1, now + 5 * MINUTE);
    vi.setSystemTime(now + 6 * MINUTE);
    vi.advanceTimersByTime(4 * MINUTE);
    expect(fired).toEqual([]); // the timer still waits its old monotonic delay
  });

  it('a backward step of an hour runs nothing early', () => {
    const now = Date.now();
    for (let id = 1; id <= 20; id++) timers.arm(id, now + 3000 + id);
    vi.setSystemTime(now - 3600_000);
    vi.advanceTimersByTime(CHECK_INTERVAL_MS);
    expect(steps).toHaveLength(1);
    expect(Math.abs(steps[0]! + 3600_000)).toBeLessThanOrEqual(1);
    vi.advanceTimersByTime(3600_000 + 3000 - CHECK_INTERVAL_MS);
    expect(fired).toEqual([]);
    expect(timers.size).toBe(20);
    vi.advanceTimersByTime(20);
    expect(fired).toHaveLength(20);
    for (const { id, at } of fired) expect(at).toBe(now + 3000 + id);
  });

  it('a change below the threshold is no step', () => {
    vi.setSystemTime(Date.now() + STEP_THRESHOLD_MS - 5);
    vi.advanceTimersByTime(CHECK_INTERVAL_MS);
    vi.setSystemTime(Date.now() - (STEP_THRESHOLD_MS - 5));
    vi.advanceTimersByTime(CHECK_INTERVAL_MS);
    expect(steps).toEqual([]);
    vi.setSystemTime(Date.now() + STEP_THRESHOLD_MS + 5);
    vi.advanceTimersByTime(CHECK_INTERVAL_MS);
    expect(steps).toHaveLength(1);
  });
});

/** The two clocks by hand, each check called directly. */
describe('clock watch readings', () => {
  let wall: number;
  let mono: number;
  let steps: number[];
  let refills: number;
  let rearms: number;
  let watch: StepWatch;

  beforeEach(() => {
    wall = Date.parse('2026-11-29T00:00:00Z');
    mono = 1000;
    steps = [];
    refills = 0;
    rearms = 0;
    watch = new StepWatch({
      clock: { now: () => wall },
      monotonic: () => mono,
      log: pino({ level: 'silent' }),
      timers: { rearmAll: () => (rearms++, 0) },
      scheduler: { followClockStep: (stepMs) => steps.push(stepMs), refillSoon: () => refills++ },
    });
    watch.check(); // the first reading
  });

  const tick = (wallMs: number, monoMs: number) => {
    wall += wallMs;
    mono += monoMs;
    return watch.check();
  };

  it('a freeze that moves both clocks (SIGSTOP) is no step, but refills at once', () => {
    expect(tick(5000, 5000)).toBe(0);
    expect(steps).toEqual([]);
    expect(rearms).toBe(0);
    expect(refills).toBe(1);
  });

  it('a freeze during which the monotonic clock stood still (a suspended VM) is a forward step', () => {
    expect(tick(5000, CHECK_INTERVAL_MS)).toBe(5000 - CHECK_INTERVAL_MS);
    expect(steps).toEqual([5000 - CHECK_INTERVAL_MS]);
    expect(rearms).toBe(1);
  });

  it('ordinary checks, and slewing at 0.5 ms/s, are no step', () => {
    for (let i = 0; i < 100; i++) expect(tick(CHECK_INTERVAL_MS + 0.125, CHECK_INTERVAL_MS)).toBe(0);
    expect(steps).toEqual([]);
    expect(refills).toBe(0);
  });

  it('a step is measured between two checks, in both directions', () => {
    expect(tick(CHECK_INTERVAL_MS - 3600_000, CHECK_INTERVAL_MS)).toBe(-3600_000);
    expect(tick(CHECK_INTERVAL_MS + 30, CHECK_INTERVAL_MS)).toBe(30);
    expect(steps).toEqual([-3600_000, 30]);
  });
});
