import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/time/clock.js';
import { MAX_TIMER_DELAY_MS, Timers } from '../../src/timers/timers.js';

const DAY = 24 * 3600 * 1000;

describe('timers', () => {
  let fired: { id: number; at: number }[];
  let timers: Timers;

  beforeEach(() => {
    // Only Date and the timer functions are faked; nothing else of the process is.
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout', 'setImmediate'], now: Date.parse('2026-11-29T00:00:00Z') });
    fired = [];
    timers = new Timers(systemClock, (id) => fired.push({ id, at: Date.now() }));
  });

  afterEach(() => {
    timers.disarmAll();
    vi.useRealTimers();
  });

  it('fires a task at its time, not before', () => {
    const runAt = Date.now() + 200;
    timers.arm(1, runAt);
    vi.advanceTimersByTime(199);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([{ id: 1, at: runAt }]);
    expect(timers.size).toBe(0);
  });

  it('with a lead, hands a task over that much before its time, not before', () => {
    let lead = 30;
    const ahead = new Timers(
      systemClock,
      (id) => fired.push({ id, at: Date.now() }),
      undefined,
      () => lead,
    );
    const runAt = Date.now() + 200;
    ahead.arm(1, runAt);
    vi.advanceTimersByTime(169);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([{ id: 1, at: runAt - 30 }]);
    // A lead that shrank while the timer waited: the timer sleeps the difference.
    ahead.arm(2, runAt + 100);
    lead = 10;
    vi.advanceTimersByTime(100); // its timer, set for runAt + 100 − 30, wakes and sleeps again
    expect(fired.map((f) => f.id)).toEqual([1]);
    vi.advanceTimersByTime(19);
    expect(fired.map((f) => f.id)).toEqual([1]);
    vi.advanceTimersByTime(1);
    expect(fired.at(-1)).toEqual({ id: 2, at: runAt + 90 });
    ahead.disarmAll();
  });

  it('does not fire a task due in 30 days early (setTimeout fires at once above 2^31-1 ms)', () => {
    const runAt = Date.now() + 30 * DAY;
    expect(30 * DAY).toBeGreaterThan(MAX_TIMER_DELAY_MS);
    timers.arm(7, runAt);
    vi.advanceTimersByTime(0);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(MAX_TIMER_DELAY_MS); // 24.8 days: the clamped timer wakes and sleeps again
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(30 * DAY - MAX_TIMER_DELAY_MS - 1);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([{ id: 7, at: runAt }]);
  });

  it('sleeps again when the wall clock is behind the monotonic timer', () => {
    const runAt = Date.now() + 1000;
    timers.arm(3, runAt);
    // The wall clock is set back 300 ms (NTP step) while the timer waits.
    vi.setSystemTime(Date.now() - 300);
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(300);
    expect(fired).toEqual([{ id: 3, at: runAt }]);
  });

  it('fires a task whose time has passed at once', () => {
    timers.arm(4, Date.now() - 60_000);
    vi.advanceTimersByTime(0);
    expect(fired.map((f) => f.id)).toEqual([4]);
  });

  it('re-arming moves the timer; disarming removes it', () => {
    const now = Date.now();
    timers.arm(5, now + 100);
    timers.arm(5, now + 500);
    expect(timers.runAtOf(5)).toBe(now + 500);
    timers.arm(6, now + 100);
    expect(timers.disarm(6)).toBe(true);
    expect(timers.disarm(6)).toBe(false);
    vi.advanceTimersByTime(499);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([{ id: 5, at: now + 500 }]);
  });

  it('a timer that woke a hair early and was due by the next reading fires, and arms again for the same time later', () => {
    const runAt = Date.now() + 100;
    // The first reading after the wake is 1 ms short of runAt, the next one is at it.
    let short = false;
    const clock = { now: () => Date.now() - (short ? ((short = false), 1) : 0) };
    const handed: number[] = [];
    const own = new Timers(clock, (id) => handed.push(id));
    own.arm(9, runAt);
    vi.advanceTimersByTime(99);
    short = true;
    vi.advanceTimersByTime(1);
    vi.advanceTimersToNextTimer(); // the check phase after the wake
    expect(handed).toEqual([9]);
    expect(own.has(9)).toBe(false);
    // Its batch left it pending (locked ahead beside late ones): armed again for the same time.
    own.arm(9, runAt);
    vi.advanceTimersToNextTimer();
    expect(handed).toEqual([9, 9]);
  });

  it('disarmAll leaves nothing to fire', () => {
    for (let id = 1; id <= 100; id++) timers.arm(id, Date.now() + id);
    expect(timers.size).toBe(100);
    timers.disarmAll();
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual([]);
    expect(timers.size).toBe(0);
  });
});

describe('timers armed already due (real timers)', () => {
  it('hand over together, in one loop turn, even when the arming took milliseconds', async () => {
    const fired: number[] = [];
    let firstTurn: number[] | undefined;
    const timers = new Timers(systemClock, (id) => {
      fired.push(id);
      // What had been handed over by the end of the turn of the first one.
      if (fired.length === 1) setImmediate(() => (firstTurn = [...fired]));
    });
    const past = Date.now() - 5_000;
    timers.arm(1, past, 0);
    const armedAt = Date.now();
    while (Date.now() < armedAt + 3); // a boot load arming its page across a millisecond or more
    timers.arm(2, past, 9);
    timers.disarm(3); // nothing to disarm: changes nothing
    timers.arm(3, past, 5);
    timers.disarm(3); // disarmed before its turn: never handed over
    expect(timers.size).toBe(2);
    while (firstTurn === undefined) await new Promise((resolve) => setTimeout(resolve, 1));
    await new Promise((resolve) => setImmediate(resolve));
    expect(firstTurn).toEqual([1, 2]);
    expect(fired).toEqual([1, 2]);
    expect(timers.size).toBe(0);
  });
});
