/**
 * Every SQL statement about the tasks table, by name, in one style: text written out once (built
 * once for the few with variants), with `?` placeholders for mysql2. A statement that compares
 * with "now" takes it as a placeholder, so tests can move time. Times come back as epoch
 * milliseconds computed by the server (see rows.ts), so no statement depends on a time zone.
 *
 * To find a query, look for its name here; to see who runs it, look for the name in task-store.ts.
 */
import { ms, TASK_COLUMNS } from './rows.js';

/** (run_at, id) after a cursor, one form for every keyset page: the leading `run_at >= ?` states
 * the index range's start outright, the OR only breaks ties within one run_at. */
const AFTER_CURSOR = ' AND run_at >= ? AND (run_at > ? OR id > ?)';

const select = (where: string) => `SELECT ${TASK_COLUMNS} FROM tasks ${where}`;

export const SQL = {
  // ── reads ───────────────────────────────────────────────────────────────────────────────
  byId: select('WHERE id = ?'),
  byKey: select('WHERE task_key = ?'),
  /** The pending occurrence of the series whose first task is ? (given twice). */
  pendingOccurrence: select("WHERE status = 'pending' AND (id = ? OR series_id = ?) ORDER BY run_at LIMIT 1"),
  /** Pending tasks in (run_at, id) order, optionally of one type, after a cursor. */
  pendingPage: (type: boolean, cursor: boolean) =>
    select(`WHERE status = 'pending'${type ? ' AND type = ?' : ''}${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`),
  finished: select('WHERE status = ? ORDER BY finished_at DESC, id DESC LIMIT ?'),
  /** What each row of a pending page weighs, read without bringing its payload over: pages are bounded in bytes on it. */
  pendingSizes: (type: boolean, cursor: boolean) =>
    `SELECT id, LENGTH(payload) + COALESCE(LENGTH(last_error), 0) + COALESCE(LENGTH(task_key), 0) FROM tasks WHERE status = 'pending'` +
    `${type ? ' AND type = ?' : ''}${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`,
  pendingByIds: select("WHERE id IN (?) AND status = 'pending' ORDER BY run_at, id"),
  /**
   * Pending tasks due in (from, until] after a cursor, as [id, runAt]: the (status, run_at) index
   * alone. With `shards`, only those of the listed shards (`id MOD 256`, src/cluster/shards.ts):
   * the id is in every secondary index entry, so the filter is read from the index too. */
  duePage: (lower: boolean, cursor: boolean, shards = false) =>
    `SELECT id, ${ms('run_at')} FROM tasks WHERE status = 'pending'${lower ? ' AND run_at > ?' : ''} AND run_at <= ?` +
    `${shards ? ' AND id MOD 256 IN (?)' : ''}${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`,
  /** Rows above an id, any status, as [id, runAt, pending]: the refill's view of new inserts. */
  insertedAfter: `SELECT id, ${ms('run_at')}, status = 'pending' FROM tasks WHERE id > ? ORDER BY id LIMIT ?`,
  pendingAmong: `SELECT id, ${ms('run_at')} FROM tasks WHERE id IN (?) AND status = 'pending'`,
  maxId: 'SELECT COALESCE(MAX(id), 0) FROM tasks',
  countOpen: "SELECT status, COUNT(*) AS n FROM tasks WHERE status IN ('pending', 'running', 'failed') GROUP BY status",
  countPendingByType: "SELECT type, COUNT(*) FROM tasks WHERE status = 'pending' GROUP BY type",
  recentLateness: `SELECT TIMESTAMPDIFF(MICROSECOND, run_at, finished_at) / 1000 FROM tasks WHERE status = 'done' ORDER BY finished_at DESC LIMIT ?`,

  // ── intake ──────────────────────────────────────────────────────────────────────────────
  /** `rows` rows of insertValues(); with `returning`, MariaDB answers each row's id. */
  insertRows: (rows: number, returning: boolean) =>
    'INSERT INTO tasks (task_key, type, payload, run_at, timezone, max_attempts, misfire, cron, created_at, updated_at) VALUES ' +
    Array.from({ length: rows }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ') +
    (returning ? ' RETURNING id' : ''),
  /** The next occurrence of a series; if it is there already, LAST_INSERT_ID answers its id. */
  insertOccurrence: `INSERT INTO tasks (type, payload, run_at, timezone, max_attempts, misfire, cron, series_id, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`,

  // ── the shop's changes ──────────────────────────────────────────────────────────────────
  /** pending → cancelled, for the ids among ? that are pending. */
  cancel: "UPDATE tasks SET status = 'cancelled', finished_at = ?, updated_at = ? WHERE id IN (?) AND status = 'pending'",
  /** A pending task moves to another instant (read in another zone). */
  reschedule: "UPDATE tasks SET run_at = ?, timezone = ?, updated_at = ? WHERE id IN (?) AND status = 'pending'",
  /** failed → pending with its attempts reset. */
  retry:
    "UPDATE tasks SET status = 'pending', attempts = 0, run_at = ?, timezone = ?, finished_at = NULL, updated_at = ? WHERE id IN (?) AND status = 'failed'",

  // ── claiming and finishing runs ─────────────────────────────────────────────────────────
  /** The due pending tasks among ?, locked in id order; rows another transaction holds are skipped. */
  lockDue: select("WHERE id IN (?) AND status = 'pending' AND run_at <= ? ORDER BY id FOR UPDATE SKIP LOCKED"),
  /** Run in this transaction: one attempt used, done. */
  markDone: "UPDATE tasks SET status = 'done', attempts = attempts + 1, finished_at = ?, updated_at = ? WHERE id IN (?)",
  /** Claimed for an outside handler: running under a lease. */
  markRunning:
    "UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_owner = ?, lease_until = ?, updated_at = ? WHERE id IN (?)",
  /** An outside run finished, while its lease is still this owner's. */
  completeLeased: `UPDATE tasks SET status = 'done', finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL
    WHERE id = ? AND status = 'running' AND lease_owner = ?`,
  /**
   * A failed run: pending again at a later run_at, or failed for good. With `leased`, only while
   * the lease is still the given owner's.
   */
  fail: (leased: boolean) =>
    `UPDATE tasks SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, attempts = attempts + ?,
       last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
     WHERE id = ?${leased ? " AND status = 'running' AND lease_owner = ?" : ''}`,

  // ── the scheduler's repairs ─────────────────────────────────────────────────────────────
  /** Overdue tasks that asked to be skipped, as [id]; read without locks, locked by id after. */
  misfiredIds: "SELECT id FROM tasks WHERE status = 'pending' AND run_at < ? AND misfire = 'skip'",
  lockMisfired: select("WHERE id IN (?) AND status = 'pending' AND run_at < ? FOR UPDATE"),
  markSkipped: "UPDATE tasks SET status = 'skipped', finished_at = ?, updated_at = ?, last_error = ? WHERE id IN (?)",
  /** Running tasks whose lease ran out (their process died mid-run). */
  lockExpiredLeases: select("WHERE status = 'running' AND lease_until < ? FOR UPDATE"),
  /** A lease ran out on the task's last attempt: failed for good. */
  failExpiredLeases: `UPDATE tasks SET status = 'failed', lease_owner = NULL, lease_until = NULL, finished_at = ?, updated_at = ?,
    last_error = CONCAT('lease expired on its last attempt; ', COALESCE(last_error, '')) WHERE id IN (?)`,
  /** A lease ran out with attempts left: pending again. */
  releaseExpiredLeases: "UPDATE tasks SET status = 'pending', lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id IN (?)",
} as const;
