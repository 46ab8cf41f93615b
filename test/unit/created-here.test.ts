import { describe, expect, it } from 'vitest';
import { CreatedHere } from '../../src/timers/created-here.js';

describe('tasks created here in shards others own', () => {
  it('are kept only when due within the window, and may be claimed until a little after their runAt', () => {
    const set = new CreatedHere(2_000);
    expect(set.add(1, 1_500, 0)).toBe(true);
    expect(set.add(2, 2_001, 0)).toBe(false); // the owner's refill arms it in time
    expect(set.has(1, 1_000)).toBe(true);
    expect(set.has(2, 1_000)).toBe(false);
    expect(set.has(1, 11_500)).toBe(true);
    expect(set.has(1, 11_501)).toBe(false);
    expect(set.size).toBe(0);
  });

  it('hold at most 10,000, making room from the ones long past', () => {
    const set = new CreatedHere(60_000);
    for (let id = 1; id <= 10_000; id++) expect(set.add(id, 1_000, 0)).toBe(true);
    expect(set.add(10_001, 1_000, 0)).toBe(false);
    expect(set.add(10_001, 20_000, 15_000)).toBe(true);
    expect(set.size).toBe(1);
  });
});
