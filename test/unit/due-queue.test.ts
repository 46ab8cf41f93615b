import { describe, expect, it } from 'vitest';
import { DueQueue } from '../../src/timers/due-queue.js';

describe('the due queue', () => {
  it('hands over the highest priority first, each priority in the order it fired', () => {
    const queue = new DueQueue();
    for (let id = 1; id <= 6; id++) queue.push(id); // priority 0
    queue.push(7, 5);
    queue.push(8, -3);
    queue.push(9, 5);
    queue.push(10, 2);
    expect(queue.length).toBe(10);
    expect(queue.take(3)).toEqual([7, 9, 10]);
    expect(queue.take(4)).toEqual([1, 2, 3, 4]);
    queue.push(11, 10);
    expect(queue.take(10)).toEqual([11, 5, 6, 8]);
    expect(queue.length).toBe(0);
  });

  it('queues a busy id once, whatever its priority, until it is released', () => {
    const queue = new DueQueue();
    queue.push(1);
    queue.push(1, 9);
    expect(queue.take(5)).toEqual([1]);
    queue.push(1, 9);
    expect(queue.length).toBe(0);
    queue.release([1]);
    queue.push(1, 9);
    expect(queue.take(5)).toEqual([1]);
  });

  it('tells what waits above a priority, and hands over only those when asked', () => {
    const queue = new DueQueue();
    expect(queue.topPriority).toBeUndefined();
    queue.push(1, -5);
    queue.push(2, -5);
    queue.push(3, 5);
    queue.push(4, 0);
    expect(queue.topPriority).toBe(5);
    expect(queue.waitingAbove(-5)).toBe(2);
    expect(queue.waitingAbove(0)).toBe(1);
    expect(queue.take(10, -5)).toEqual([3, 4]);
    expect(queue.topPriority).toBe(-5);
    expect(queue.waitingAbove(-5)).toBe(0);
    expect(queue.take(10, -5)).toEqual([]);
    expect(queue.take(10)).toEqual([1, 2]);
    expect(queue.length).toBe(0);
  });
});
