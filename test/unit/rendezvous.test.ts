import { describe, expect, it } from 'vitest';
import { assign, ownerOf, shardsFor } from '../../src/cluster/rendezvous.js';
import { SHARDS, shardOf } from '../../src/cluster/shards.js';

const names = (n: number) => Array.from({ length: n }, (_, i) => `host-${i}:${1000 + i}:abcd${i}`);

/** Shards whose owner differs between two assignments. */
function moved(before: string[], after: string[]): number {
  let count = 0;
  for (let shard = 0; shard < SHARDS; shard++) if (ownerOf(shard, before) !== ownerOf(shard, after)) count++;
  return count;
}

describe('shards', () => {
  it('are id MOD 256, fixed', () => {
    expect(SHARDS).toBe(256);
    expect([0, 1, 255, 256, 257, 1_000_000].map(shardOf)).toEqual([0, 1, 255, 0, 1, 1_000_000 % 256]);
  });
});

describe('rendezvous assignment', () => {
  it('gives every shard exactly one owner, the same whatever the order of the members', () => {
    const members = names(3);
    const owned = assign(members);
    const all = [...owned.values()].flat().sort((a, b) => a - b);
    expect(all).toEqual(Array.from({ length: SHARDS }, (_, i) => i));
    expect(assign([...members].reverse())).toEqual(owned);
    for (const member of members) expect([...shardsFor(member, members)]).toEqual(owned.get(member));
  });

  it('spreads the shards about evenly', () => {
    for (const n of [2, 3, 5, 8]) {
      const counts = [...assign(names(n)).values()].map((shards) => shards.length);
      for (const count of counts) {
        expect(count).toBeGreaterThan((SHARDS / n) * 0.6);
        expect(count).toBeLessThan((SHARDS / n) * 1.4);
      }
    }
  });

  it('moves only the newcomer’s share when a member joins, and only the leaver’s when one leaves', () => {
    for (const n of [1, 2, 3, 4, 7]) {
      const before = names(n);
      const joined = [...before, `newcomer-${n}`];
      const joinMoves = moved(before, joined);
      // Exactly the shards the newcomer now owns moved, all of them to the newcomer.
      expect(joinMoves).toBe(assign(joined).get(`newcomer-${n}`)!.length);
      expect(joinMoves).toBeGreaterThan((SHARDS / (n + 1)) * 0.6);
      expect(joinMoves).toBeLessThan((SHARDS / (n + 1)) * 1.4);
      if (n > 1) {
        const left = before.slice(1);
        const leaveMoves = moved(before, left);
        expect(leaveMoves).toBe(assign(before).get(before[0]!)!.length);
        expect(leaveMoves).toBeLessThan((SHARDS / n) * 1.4);
      }
    }
  });

  it('counts a member that asks once even when it is not in the list yet', () => {
    expect(shardsFor('alone', []).size).toBe(SHARDS);
    expect(ownerOf(0, [])).toBeUndefined();
  });
});
