/**
 * Arming in a shard another process owns (SHARDING=on): a create through this process is armed
 * here only when due soon (the owner's refill finds new rows by their ids), but a move (a
 * reschedule, replace, retry or a run's backoff written here) is armed here whatever its new time
 * within the horizon: the owner keeps the timer of the old time, and an earlier one would wait for
 * its reconcile (tasks moved from 30 s to 1 s ahead ran 25 s late, test/process/sharded-creates).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Ownership } from '../../src/cluster/lease-keeper.js';
import { arm, armCreated } from '../../src/lifecycle/effects.js';
import { systemClock } from '../../src/time/clock.js';
import { Arming } from '../../src/timers/arming.js';
import { CreatedHere } from '../../src/timers/created-here.js';
import { DueQueue } from '../../src/timers/due-queue.js';
import { Timers } from '../../src/timers/timers.js';

describe('arming in a shard another process owns', () => {
  let fired: number[];
  let timers: Timers;
  let createdHere: CreatedHere;
  let arming: Arming;
  let now: number;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout', 'setImmediate'], now: Date.parse('2026-12-05T10:00:00Z') });
    now = Date.now();
    fired = [];
    // This process owns shard 1 alone.
    const ownership: Ownership = { owns: (id) => id % 256 === 1, mayClaim: (id) => id % 256 === 1 };
    timers = new Timers(systemClock, (id) => fired.push(id));
    createdHere = new CreatedHere(2000);
    arming = new Arming(timers, new DueQueue(), ownership, { set: createdHere, now: () => Date.now() });
    arming.coveredUntil = now + 60_000;
  });

  afterEach(() => {
    timers.disarmAll();
    vi.useRealTimers();
  });

  it('arms a create only when due soon, and a move whatever its time within the horizon', () => {
    arming.apply([armCreated(2, now + 1_000, 0, 'close_order'), armCreated(3, now + 30_000, 0, 'close_order')]);
    expect([timers.has(2), timers.has(3)]).toEqual([true, false]);
    // Moved through this process: to 20 s ahead, to 5 s, and past the horizon.
    arming.apply([arm(3, now + 20_000, 0, 'close_order'), arm(4, now + 5_000, 0, 'close_order'), arm(5, now + 90_000, 0, 'close_order')]);
    expect([timers.has(3), timers.has(4), timers.has(5)]).toEqual([true, true, false]);
    expect([createdHere.has(3, now), createdHere.has(4, now), createdHere.has(5, now)]).toEqual([true, true, false]);
    vi.advanceTimersByTime(20_000);
    expect(fired).toEqual([2, 4, 3]);
    // Owned or not, a move past the horizon disarms the old timer.
    arming.apply([arm(257, now + 30_000, 0, 'close_order'), arm(258, now + 30_000, 0, 'close_order')]);
    arming.apply([arm(257, now + 90_000, 0, 'close_order'), arm(258, now + 90_000, 0, 'close_order')]);
    expect([timers.has(257), timers.has(258)]).toEqual([false, false]);
  });
});
