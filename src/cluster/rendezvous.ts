/**
 * Which live member should own each shard: rendezvous (highest-random-weight) hashing. Every member
 * scores every shard with a hash of (member, shard) and the highest score owns it, so each process
 * computes the same assignment from the same members, with no coordinator; a member that joins or
 * leaves moves about SHARDS/N shards.
 * See docs/architecture.md#several-processes.
 */
import { createHash } from 'node:crypto';
import { SHARDS } from './shards.js';

function weight(member: string, shard: number): bigint {
  return createHash('sha256').update(`${member}\u0000${shard}`).digest().readBigUInt64BE(0);
}

/** The member that should own `shard` (undefined without members). Ties go to the smaller name. */
export function ownerOf(shard: number, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = -1n;
  for (const member of members) {
    const w = weight(member, shard);
    if (w > bestWeight || (w === bestWeight && best !== undefined && member < best)) {
      best = member;
      bestWeight = w;
    }
  }
  return best;
}

/** Every shard's owner among `members`: member → its shards. */
export function assign(members: readonly string[], shards = SHARDS): Map<string, number[]> {
  const owned = new Map<string, number[]>(members.map((member) => [member, []]));
  for (let shard = 0; shard < shards; shard++) {
    const owner = ownerOf(shard, members);
    if (owner !== undefined) owned.get(owner)!.push(shard);
  }
  return owned;
}

/** The shards `member` should own among `members`. */
export function shardsFor(member: string, members: readonly string[], shards = SHARDS): Set<number> {
  return new Set(assign([...new Set([...members, member])], shards).get(member));
}
