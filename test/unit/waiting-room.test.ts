/**
 * The waiting room: tasks leave in (runAt, id) order whatever order they came in, a type holds at
 * most its capacity, and each task's stays are summed by what held it, until its run is admitted.
 */
import { describe, expect, it } from 'vitest';
import { WaitingRoom, type Waiting } from '../../src/dispatch/waiting-room.js';

const entry = (id: number, runAt: number, key = 'mail', reason: Waiting['reason'] = 'paused', since = 0): Waiting => ({
  id,
  runAt,
  key,
  reason,
  since,
});

describe('the waiting room', () => {
  it('lets tasks leave in (runAt, id) order, not the order they came in', () => {
    const room = new WaitingRoom();
    for (const [id, runAt] of [
      [5, 300],
      [2, 100],
      [9, 100],
      [1, 200],
    ] as const)
      room.enter('mail', entry(id, runAt));
    expect(room.leaveAll('mail').map(({ id }) => id)).toEqual([2, 9, 1, 5]);
    expect(room.sizeOf('mail')).toBe(0);
    expect([...room.types()]).toEqual([]);
  });

  it('asks about each task once, in that order, and keeps the ones it did not let through', () => {
    const room = new WaitingRoom();
    room.enter('mail', entry(1, 300, 'A'));
    room.enter('mail', entry(2, 100, 'B'));
    room.enter('mail', entry(3, 200, 'A'));
    const asked: number[] = [];
    const left = room.leave('mail', ({ id, key }) => {
      asked.push(id);
      return key === 'A';
    });
    expect(asked).toEqual([2, 3, 1]);
    expect(left.map(({ id }) => id)).toEqual([3, 1]);
    expect(room.sizeOf('mail')).toBe(1);
  });

  it('holds at most its capacity per type, so a type with a large backlog crowds out no other type', () => {
    const room = new WaitingRoom(3);
    expect([1, 2, 3, 4].map((id) => room.enter('mail', entry(id, id)))).toEqual([true, true, true, false]);
    // The same task again takes no second place.
    expect(room.enter('mail', entry(3, 3))).toBe(true);
    expect(room.sizeOf('mail')).toBe(3);
    expect(room.enter('sms', entry(10, 1))).toBe(true);
    room.leave('mail', ({ id }) => id === 1);
    expect(room.enter('mail', entry(4, 4))).toBe(true);
    expect(room.leaveAll('mail').map(({ id }) => id)).toEqual([2, 3, 4]);
  });

  it('remembers the ids that left until asked once', () => {
    const room = new WaitingRoom();
    room.enter('mail', entry(1, 1));
    room.enter('mail', entry(2, 2));
    room.leave('mail', ({ id }) => id === 1);
    expect(room.hasWaited(1)).toBe(true);
    expect(room.hasWaited(1)).toBe(false);
    expect(room.hasWaited(2)).toBe(false);
  });

  it('lets everyone go unanswered when cleared', () => {
    const room = new WaitingRoom();
    room.enter('mail', entry(1, 1));
    room.clear();
    expect(room.sizeOf('mail')).toBe(0);
    expect(room.hasWaited(1)).toBe(false);
  });

  it("sums a task's stays by what held it, answers the longest as its reason, once", () => {
    let now = 1000;
    const room = new WaitingRoom(10, () => now);
    room.enter('mail', entry(1, 900, 'mail', 'paused', 1000));
    now = 4000;
    room.leaveAll('mail');
    // Woken, then over its limit: it waits again.
    room.enter('mail', entry(1, 900, 'mail', 'concurrency', 4100));
    now = 4600;
    room.leaveAll('mail');
    expect(room.takeWait(1)).toEqual({ ms: 3500, reason: 'pause' });
    expect(room.takeWait(1)).toBeUndefined();
    expect(room.takeWait(2)).toBeUndefined();
    // A run that never began gives its wait back, to be counted with the next.
    room.giveBack(1, { ms: 200, reason: 'limit' });
    expect(room.takeWait(1)).toEqual({ ms: 200, reason: 'limit' });
  });
});
