/** The count of outside slots: a batch reserves what is free, gives back what it did not use; never more than the capacity. */
import { describe, expect, it } from 'vitest';
import { OutsideSlots } from '../../src/dispatch/outside-slots.js';

describe('outside slots', () => {
  it('reserve what is free, never more than asked or than the capacity', () => {
    const slots = new OutsideSlots(3);
    expect(slots.reserve(2)).toBe(2);
    expect(slots.reserve(5)).toBe(1);
    expect(slots.reserve(1)).toBe(0);
    expect([slots.busy, slots.free]).toEqual([3, 0]);
  });

  it('come back when a batch gives back its unused ones and when a call ends', () => {
    const slots = new OutsideSlots(3);
    const reserved = slots.reserve(3);
    const used = 1;
    slots.giveBack(reserved - used);
    expect(slots.busy).toBe(1);
    slots.giveBack(1);
    expect([slots.busy, slots.free]).toEqual([0, 3]);
  });

  it('never count below zero', () => {
    const slots = new OutsideSlots(2);
    slots.giveBack(5);
    expect(slots.busy).toBe(0);
    expect(slots.reserve(3)).toBe(2);
  });
});
