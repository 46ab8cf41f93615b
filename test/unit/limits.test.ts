/**
 * Type admission as a whole, without a database: the settings put in force, the tickets, the
 * waiting tasks and when they are handed back. Fake timers fake only Date, setTimeout and
 * clearTimeout.
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { keyOf, TypeAdmission, WAKE_SWEEP_MS } from '../../src/dispatch/limits.js';
import type { TypeControl } from '../../src/store/type-controls.js';
import { aControl as control, aTask } from '../helpers/tasks.js';

const clock = { now: () => Date.now() };

function admission(controls: TypeControl[], waitingPerType?: number) {
  const limits = new TypeAdmission(clock, { waitingPerType });
  const handed: number[][] = [];
  limits.consume((ids) => handed.push(ids));
  limits.apply(controls);
  return { limits, handed };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'], now: 1_000_000 });
});

afterEach(() => {
  vi.useRealTimers();
});

describe('type admission', () => {
  it('admits anything of a type without settings', () => {
    const { limits } = admission([]);
    expect(limits.admit(aTask({ id: 1 }), Date.now())).toMatchObject({ type: 'alpha', key: 'alpha' });
    expect(limits.states().get('alpha')).toMatchObject({ control: undefined, running: 1, waiting: 0 });
  });

  it('holds a paused type back, and hands its tasks back in (runAt, id) order once resumed', () => {
    const { limits, handed } = admission([control('alpha', { paused: true })]);
    const tasks = [aTask({ id: 1, runAt: 300 }), aTask({ id: 2, runAt: 100 }), aTask({ id: 3, runAt: 200 })];
    for (const task of tasks) {
      expect(limits.admit(task, Date.now())).toBeUndefined();
      expect(limits.hold(task)).toBe(true);
    }
    expect(limits.states().get('alpha')?.waiting).toBe(3);
    limits.apply([control('alpha', { updatedAt: 2 })]);
    expect(handed).toEqual([[2, 3, 1]]);
    expect(limits.waited(2)).toBe(true);
    expect(limits.waited(2)).toBe(false);
  });

  it('a settings change that leaves a type as it was hands nothing back', () => {
    const { limits, handed } = admission([control('alpha', { maxConcurrency: 1 })]);
    limits.admit(aTask({ id: 1 }), Date.now());
    limits.hold(aTask({ id: 2 }));
    limits.apply([control('alpha', { maxConcurrency: 1 })]);
    expect(handed).toEqual([]);
  });

  it('a concurrency limit: a finished run wakes the next waiting task of its group, not another group', () => {
    const { limits, handed } = admission([control('alpha', { maxConcurrency: 1, groupBy: 'shop' })]);
    const a1 = limits.admit(aTask({ id: 1, payload: { shop: 'A' } }), Date.now())!;
    expect(limits.admit(aTask({ id: 2, payload: { shop: 'A' } }), Date.now())).toBeUndefined();
    limits.hold(aTask({ id: 2, payload: { shop: 'A' } }));
    expect(limits.admit(aTask({ id: 3, payload: { shop: 'B' } }), Date.now())).toBeDefined();
    expect(handed).toEqual([]);
    limits.release(a1);
    expect(handed).toEqual([[2]]);
  });

  it('a run that never began (rolled back) gives back its slot and its start', () => {
    const { limits } = admission([control('alpha', { ratePerSecond: 1 })]);
    const now = Date.now();
    const ticket = limits.admit(aTask({ id: 1 }), now)!;
    expect(limits.admit(aTask({ id: 2 }), now)).toBeUndefined();
    limits.rollBack(ticket);
    expect(limits.admit(aTask({ id: 2 }), now)).toBeDefined();
  });

  it('a finished run keeps its start: the rate window still counts it', () => {
    const { limits } = admission([control('alpha', { ratePerSecond: 1 })]);
    const now = Date.now();
    limits.release(limits.admit(aTask({ id: 1 }), now)!);
    expect(limits.admit(aTask({ id: 2 }), now)).toBeUndefined();
  });

  it('a rate limit: a held task is woken by a timer once the window has room, not before', () => {
    const { limits, handed } = admission([control('alpha', { ratePerSecond: 2 })]);
    const start = Date.now();
    limits.admit(aTask({ id: 1 }), start);
    limits.admit(aTask({ id: 2 }), start);
    expect(limits.admit(aTask({ id: 3 }), start)).toBeUndefined();
    limits.hold(aTask({ id: 3 }));
    vi.advanceTimersByTime(999);
    expect(handed).toEqual([]);
    // At +1000 the first starts leave the window (the sweep may find that), at +1001 its timer fires.
    vi.advanceTimersByTime(2);
    expect(handed).toEqual([[3]]);
    expect(limits.admit(aTask({ id: 3 }), Date.now())).toBeDefined();
  });

  it('turns a task away when its type has no place left; another type keeps its own places', () => {
    const { limits } = admission([control('alpha', { paused: true })], 2);
    expect([1, 2, 3].map((id) => limits.hold(aTask({ id })))).toEqual([true, true, false]);
    expect(limits.hold(aTask({ id: 4, type: 'beta' }))).toBe(true);
    expect(limits.states().get('alpha')?.waiting).toBe(2);
  });

  it("a woken task that comes back neither admitted nor held (run by another process meanwhile) gives its place to the next at once", () => {
    const { limits, handed } = admission([control('alpha', { maxConcurrency: 1 })]);
    const first = limits.admit(aTask({ id: 1 }), Date.now())!;
    for (const id of [2, 3]) {
      expect(limits.admit(aTask({ id, runAt: id }), Date.now())).toBeUndefined();
      limits.hold(aTask({ id, runAt: id }));
    }
    limits.release(first);
    expect(handed).toEqual([[2]]);
    // The dispatcher found 2 done already (another process held it too, and ran it).
    limits.returned([2]);
    expect(handed).toEqual([[2], [3]]);
    // An id that was not handed out, or is back already, wakes nothing.
    limits.returned([2, 99]);
    expect(handed).toEqual([[2], [3]]);
  });

  it('asks a waiting type again every WAKE_SWEEP_MS, so a wake-up lost on some path strands nothing', () => {
    const { limits, handed } = admission([control('alpha', { maxConcurrency: 1 })]);
    const first = limits.admit(aTask({ id: 1 }), Date.now())!;
    for (const id of [2, 3]) limits.hold(aTask({ id, runAt: id }));
    limits.release(first);
    expect(handed).toEqual([[2]]);
    // 2 is never reported back (put back on its timer after a failed batch, say).
    vi.advanceTimersByTime(WAKE_SWEEP_MS - 1);
    expect(handed).toEqual([[2]]);
    vi.advanceTimersByTime(1);
    expect(handed).toEqual([[2], [3]]);
    // Nothing waits any more: the sweep ends.
    vi.advanceTimersByTime(30 * WAKE_SWEEP_MS);
    expect(handed).toEqual([[2], [3]]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('wakes nothing once stopped, and forgets its waiting tasks and timers', () => {
    const { limits, handed } = admission([control('alpha', { ratePerSecond: 1 })]);
    limits.admit(aTask({ id: 1 }), Date.now());
    limits.hold(aTask({ id: 2 }));
    limits.stop();
    vi.advanceTimersByTime(5000);
    limits.apply([]);
    expect(handed).toEqual([]);
    expect(limits.states().get('alpha')?.waiting).toBe(0);
  });
});

describe('the group key', () => {
  const digest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 22);

  it('is the type without groupBy, else the type and a digest of the field value (JSON for a non-string)', () => {
    expect(keyOf({ type: 'mail', payload: { shop: 'A' } }, undefined)).toBe('mail');
    expect(keyOf({ type: 'mail', payload: { shop: 'A' } }, { groupBy: 'shop' })).toBe(`mail\u0000${digest('A')}`);
    expect(keyOf({ type: 'mail', payload: { shop: 7 } }, { groupBy: 'shop' })).toBe(`mail\u0000${digest('7')}`);
    expect(keyOf({ type: 'mail', payload: {} }, { groupBy: 'shop' })).toBe(`mail\u0000${digest('')}`);
    expect(keyOf({ type: 'mail', payload: null }, { groupBy: 'shop' })).toBe(`mail\u0000${digest('')}`);
  });

  it('stays short whatever the size of the value (a 64 KiB body)', () => {
    const key = keyOf({ type: 'mail', payload: { body: 'x'.repeat(64 * 1024) } }, { groupBy: 'body' });
    expect(key.length).toBe('mail'.length + 1 + 22);
  });
});

describe('the groups kept for the rate windows', () => {
  const task = (id: number) => aTask({ id, type: 'mail', payload: { body: `${id}:${'x'.repeat(1024)}` } });

  it('drop a group once its starts left the window: 10,000 distinct values leave a handful', () => {
    const { limits } = admission([control('mail', { ratePerSecond: 5, groupBy: 'body' })]);
    let most = 0;
    for (let id = 1; id <= 10_000; id++) {
      const ticket = limits.admit(task(id), Date.now());
      expect(ticket).toBeDefined();
      limits.release(ticket!);
      most = Math.max(most, limits.groupsTracked);
      vi.advanceTimersByTime(10); // 100 distinct groups a second
    }
    // A group's starts matter for two windows (2 s): at most ~300 groups are kept at once.
    expect(most).toBeLessThanOrEqual(400);
    vi.advanceTimersByTime(5000);
    limits.admit(task(10_001), Date.now());
    expect(limits.groupsTracked).toBe(1);
  });

  it('keep at most maxGroups, dropping the least recent start, when the window is long (a slow rate)', () => {
    const limits = new TypeAdmission(clock, { maxGroups: 1000 });
    limits.apply([control('mail', { ratePerSecond: 0.001, groupBy: 'body' })]); // a window of 1000 s
    for (let id = 1; id <= 10_000; id++) {
      limits.release(limits.admit(task(id), Date.now())!);
      vi.advanceTimersByTime(1);
    }
    expect(limits.groupsTracked).toBe(1000);
    // The latest groups are the ones kept: the latest is still held by its rate, the first forgotten.
    expect(limits.admit(task(10_000), Date.now())).toBeUndefined();
    expect(limits.admit(task(1), Date.now())).toBeDefined();
  });
});
