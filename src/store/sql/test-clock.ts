/**
 * The test clock's statements (store/test-clock.ts): the database's mark, and what falls due next.
 * Every "now" is a placeholder: the test clock's time, not the database's.
 */
export const TEST_CLOCK_MARK = 'test_clock';

const OPEN = 'finished_at IS NULL';

export const TEST_CLOCK = {
  readMark: 'SELECT value FROM punctual_meta WHERE name = ?',
  mark: 'INSERT INTO punctual_meta (name, value, updated_at) VALUES (?, ?, UTC_TIMESTAMP(3)) ON DUPLICATE KEY UPDATE value = value',
  unmark: 'DELETE FROM punctual_meta WHERE name = ?',
  /** Any task at all, whatever its state: a database with history is somebody's. */
  anyTask: 'SELECT COUNT(*) FROM (SELECT 1 FROM punctual_tasks LIMIT 1000) AS some',
  /** The next instant after now at which something falls due: a pending task's runAt, or a running task's lease end. */
  nextAfter: `SELECT
      (SELECT MIN(run_at) FROM punctual_tasks WHERE status = 'pending' AND ${OPEN} AND run_at > ?),
      (SELECT MIN(lease_until) FROM punctual_tasks WHERE status = 'running' AND ${OPEN} AND lease_until > ?)`,
  /** The pending tasks due by now, by type. */
  dueByType: `SELECT type, COUNT(*) FROM punctual_tasks WHERE status = 'pending' AND ${OPEN} AND run_at <= ? GROUP BY type`,
  /** The pending tasks due by now (a database handler's run is pending to others until it commits), first 100. */
  dueIds: `SELECT id, type FROM punctual_tasks WHERE status = 'pending' AND ${OPEN} AND run_at <= ? ORDER BY run_at, id LIMIT 100`,
  /** The running tasks (a handler or a pull worker has them), first 100. */
  running: `SELECT id FROM punctual_tasks WHERE status = 'running' AND ${OPEN} ORDER BY id LIMIT 100`,
} as const;
