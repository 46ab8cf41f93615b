import { describe, expect, it } from 'vitest';
import { spreadOffset } from '../../src/time/spread.js';

describe('spread', () => {
  it('the same key always lands on the same offset, within [0, spreadMs)', () => {
    for (const key of ['close_order:SN1', 'close_order:SN2', '', 'ключ', 'a'.repeat(191)]) {
      const offset = spreadOffset(key, 30_000);
      expect(offset).toBe(spreadOffset(key, 30_000));
      expect(offset).toBeGreaterThanOrEqual(0);
      expect(offset).toBeLessThan(30_000);
      expect(Number.isInteger(offset)).toBe(true);
    }
    expect(spreadOffset('x', 0)).toBe(0);
    expect(spreadOffset('x', 1)).toBe(0);
  });

  it('keys of a wall spread evenly: 100,000 keys over 30 s, every 1 s slot within 10 % of its share', () => {
    const slots = new Array<number>(30).fill(0);
    for (let i = 0; i < 100_000; i++) slots[Math.floor(spreadOffset(`close_order:SN${i}`, 30_000) / 1000)]!++;
    const share = 100_000 / 30;
    for (const count of slots) expect(Math.abs(count - share) / share).toBeLessThan(0.1);
  });

  it('without a key, the offset is random, chosen by the source given', () => {
    expect(spreadOffset(null, 30_000, () => 0.5)).toBe(15_000);
    expect(spreadOffset(null, 30_000, () => 0.999_999)).toBe(29_999);
  });
});
