/**
 * Every statement about the members table: one row per live process (SHARDING=on), its
 * heartbeat in database time. Runners: store/leases.ts.
 */
export const MEMBERS = {
  /** Members gone for a day: a crashed process leaves its row behind. */
  forgetOld: 'DELETE FROM punctual_members WHERE heartbeat_at < UTC_TIMESTAMP(3) - INTERVAL 1 DAY',
  heartbeat:
    'INSERT INTO punctual_members (id, heartbeat_at) VALUES (?, UTC_TIMESTAMP(3)) ON DUPLICATE KEY UPDATE heartbeat_at = UTC_TIMESTAMP(3)',
  /** Members whose heartbeat is within ? µs, as [id]. */
  live: 'SELECT id FROM punctual_members WHERE heartbeat_at > UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND',
  leave: 'DELETE FROM punctual_members WHERE id = ?',
  /** Every member as [id, heartbeat age in ms, shards it holds a valid lease of]: GET /cluster. */
  withShards: `SELECT m.id, TIMESTAMPDIFF(MICROSECOND, m.heartbeat_at, UTC_TIMESTAMP(3)) DIV 1000,
      (SELECT COUNT(*) FROM punctual_shard_leases s WHERE s.owner = m.id AND s.lease_until > UTC_TIMESTAMP(3))
    FROM punctual_members m ORDER BY m.id`,
} as const;
