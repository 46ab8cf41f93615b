/**
 * Shards: every task belongs to one of SHARDS shards, `id MOD 256`. The count is fixed for good
 * (a task's shard must never change while processes disagree about it): changing it would be a
 * new scheme, not a setting. Derived from the id, the shard needs no column and no default, so a
 * shop's plain `INSERT INTO punctual_tasks (type, payload, run_at)` belongs to a shard like any other task,
 * and any part of the process knows a task's shard from its id alone.
 */
export const SHARDS = 256;

export function shardOf(id: number): number {
  return id % SHARDS;
}

/** The ids among `ids` whose shard is in `shards`. */
export function inShards(ids: Iterable<number>, shards: ReadonlySet<number>): number[] {
  const found: number[] = [];
  for (const id of ids) if (shards.has(shardOf(id))) found.push(id);
  return found;
}
