/** The lead a batch may start by (time/lock-ahead.ts) and the wait for its runAt (time/clock.ts until). */
import { describe, expect, it } from 'vitest';
import { until, type Clock } from '../../src/time/clock.js';
import type { ClockReading } from '../../src/time/db-clock.js';
import { AUTO_MAX_MS, lockAhead } from '../../src/time/lock-ahead.js';

const reading = (halfRoundTripMs: number | null): ClockReading => ({ offsetMs: 0, uncertaintyMs: halfRoundTripMs });

describe('the lead', () => {
  it('is the setting when it is a number', () => {
    expect(lockAhead(0, () => reading(5))()).toBe(0);
    expect(lockAhead(120, () => reading(5))()).toBe(120);
  });

  it('is, with auto, two measured round trips and 2 ms, capped, and follows each measurement', () => {
    let current = reading(null);
    const lead = lockAhead('auto', () => current);
    expect(lead()).toBe(2); // not measured yet
    current = reading(0.1); // loopback
    expect(lead()).toBe(3);
    current = reading(1.2); // 1 ms each way through a proxy: a 2.4 ms round trip
    expect(lead()).toBe(7);
    current = reading(400); // a database a continent away
    expect(lead()).toBe(AUTO_MAX_MS);
  });
});

describe('until', () => {
  it('resolves once the clock reads the time, not before', async () => {
    const at = Date.now() + 25;
    await until({ now: () => Date.now() }, at);
    expect(Date.now()).toBeGreaterThanOrEqual(at);
  });

  it('waits out a clock stepped back meanwhile', async () => {
    let offset = 0;
    const clock: Clock = { now: () => Date.now() + offset };
    const at = clock.now() + 10;
    const stepBack = setTimeout(() => (offset = -30), 5);
    const started = Date.now();
    await until(clock, at);
    clearTimeout(stepBack);
    expect(clock.now()).toBeGreaterThanOrEqual(at);
    expect(Date.now() - started).toBeGreaterThanOrEqual(35);
  });

  it('resolves at once for a time already past', async () => {
    let read = 0;
    await until({ now: () => (read++, 1000) }, 999);
    expect(read).toBe(1);
  });
});
