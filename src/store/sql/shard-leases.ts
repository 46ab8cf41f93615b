/**
 * Every statement about the punctual_shard_leases table: one row per shard (`id MOD 256` of a task),
 * its owner, until when (lease_until) and its epoch, the fencing token: the epoch goes up each
 * time the shard changes hands, so a (shard, epoch) pair names one tenure of one owner, and a
 * claim made under it holds only while that tenure lasts (Temporal's range_id).
 *
 * Every time is the database's (UTC_TIMESTAMP(3)): processes on several machines never compare
 * their own clocks. Runners: store/leases.ts.
 */
export const SHARD_LEASES = {
  /** One row per shard, as ? rows of [shard] (the rows already there are kept). */
  seed: 'INSERT IGNORE INTO punctual_shard_leases (shard) VALUES ?',
  /**
   * Takes or renews the shards among ? (the third ?) for ? (the owner: first, second and last ?)
   * for ? µs: those free, whose lease ran out, or the owner's already. The epoch goes up when the
   * owner changes (from another process or from none), not on a renewal. epoch first: MySQL and
   * MariaDB assign left to right, so it still sees the old owner.
   */
  take: `UPDATE punctual_shard_leases SET epoch = IF(owner <=> ?, epoch, epoch + 1), owner = ?,
           lease_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
         WHERE shard IN (?) AND (owner <=> ? OR owner IS NULL OR lease_until < UTC_TIMESTAMP(3))`,
  /** The shards ? holds a valid lease of, as [shard, epoch]. */
  held: 'SELECT shard, epoch FROM punctual_shard_leases WHERE owner = ? AND lease_until > UTC_TIMESTAMP(3)',
  /**
   * Of the [shard, epoch] pairs among ? (the second ?), the shards ? still holds a valid lease of
   * at that very epoch, as [shard]: the fence of a claim.
   */
  heldAt: 'SELECT shard FROM punctual_shard_leases WHERE owner = ? AND lease_until > UTC_TIMESTAMP(3) AND (shard, epoch) IN (?)',
  release: 'UPDATE punctual_shard_leases SET owner = NULL, lease_until = NULL WHERE owner = ? AND shard IN (?)',
  releaseAll: 'UPDATE punctual_shard_leases SET owner = NULL, lease_until = NULL WHERE owner = ?',
  /** Shards with a valid lease, whoever holds it. */
  countOwned: 'SELECT COUNT(*) FROM punctual_shard_leases WHERE owner IS NOT NULL AND lease_until > UTC_TIMESTAMP(3)',
} as const;
