/**
 * A shard given up to another member keeps its soon-due tasks armed here, claimable without the
 * shard, until the new owner has them: between the give-up and the new owner's next round no one
 * else has them armed (a create through the old owner ran 400-800 ms late without this).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Ownership } from '../../src/cluster/lease-keeper.js';
import { systemClock } from '../../src/time/clock.js';
import { Arming } from '../../src/timers/arming.js';
import { CreatedHere } from '../../src/timers/created-here.js';
import { DueQueue } from '../../src/timers/due-queue.js';
import { Timers } from '../../src/timers/timers.js';

describe('giving up a shard', () => {
  let owned: Set<number>;
  let fired: number[];
  let timers: Timers;
  let createdHere: CreatedHere;
  let arming: Arming;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout', 'setImmediate'], now: Date.parse('2026-12-04T10:00:00Z') });
    owned = new Set([1, 2]);
    fired = [];
    const ownership: Ownership = { owns: (id) => owned.has(id % 256), mayClaim: (id) => owned.has(id % 256) };
    timers = new Timers(systemClock, (id) => fired.push(id));
    createdHere = new CreatedHere(2000);
    arming = new Arming(timers, new DueQueue(), ownership, { set: createdHere, now: () => Date.now() });
    arming.coveredUntil = Number.POSITIVE_INFINITY;
  });

  afterEach(() => {
    timers.disarmAll();
    vi.useRealTimers();
  });

  it('keeps the tasks due within the lease armed and claimable here; disarms the later ones and the other ways of losing', () => {
    const now = Date.now();
    // Shard 1: due in 300 ms and in a minute; shard 2: due in 300 ms.
    for (const [id, runAt] of [
      [1, now + 300],
      [257, now + 60_000],
      [2, now + 300],
    ] as const)
      arming.armRead({ id, runAt, priority: 0 });
    owned.delete(1);
    expect(arming.disarmShards([1], 5_000)).toBe(1);
    expect(timers.has(1)).toBe(true);
    expect(createdHere.has(1, now)).toBe(true);
    expect(timers.has(257)).toBe(false);
    expect(createdHere.has(257, now)).toBe(false);
    // Lost (a lapsed lease, a taker) or leaving: nothing is kept.
    owned.delete(2);
    expect(arming.disarmShards([2], 0)).toBe(1);
    expect(timers.has(2)).toBe(false);
    vi.advanceTimersByTime(300);
    expect(fired).toEqual([1]);
  });
});
