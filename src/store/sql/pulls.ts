/**
 * The statements of pull leases (src/store/pulls.ts): worker types' due tasks leased to a pull
 * worker, and the worker's ack, nack and extend. A pull lease is an outside run's lease
 * (`status = 'running'`, `lease_owner`, `lease_until`), its owner the lease token, so the lease
 * recovery of every other run applies to it as it is. Every settle names the lease it settles and
 * the state it expects (invariant 13): a stale or foreign token, or a lease that ran out, writes
 * nothing. Worker types' rows are read through the (type, status, run_at) index.
 */
import { ms, TASK_COLUMNS } from '../rows.js';

/** The held lease `?` of task `?`: running under that token, not run out by `?`. */
const HELD = "id = ? AND status = 'running' AND lease_owner = ? AND lease_until >= ?";

export const PULL_SQL = {
  /**
   * The due pending tasks of the types ? at ?, oldest first, at most ?, locked (rows another
   * transaction holds are skipped; one past its expireAfterMs is locked too: the claim ends it as
   * expired, lifecycle/pull.ts, a worker never gets it).
   */
  lockDueOfTypes: `SELECT ${TASK_COLUMNS} FROM tasks FORCE INDEX (tasks_type_status_run_at)
    WHERE type IN (?) AND status = 'pending' AND run_at <= ?
    ORDER BY run_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
  /**
   * When the next pending task of the types ? falls due after ?, in ms as `next_due` (NULL: none;
   * one range of the index per type): the claim's look ahead.
   */
  nextDueOfTypes: `SELECT ${ms('MIN(run_at)')} AS next_due FROM tasks FORCE INDEX (tasks_type_status_run_at)
    WHERE type IN (?) AND status = 'pending' AND run_at > ?`,
  /**
   * Several leases in one statement: the tasks among the last ?, while pending, running from ?
   * (their lateness), one attempt counted, each to the token and lease end at its own place in
   * the two lists (ELT(FIELD(id, ids…), values…)).
   */
  leaseRows: `UPDATE tasks SET lateness_ms = TIMESTAMPDIFF(MICROSECOND, run_at, ?) DIV 1000, status = 'running',
    attempts = attempts + 1, lease_owner = ELT(FIELD(id, ?), ?), lease_until = ELT(FIELD(id, ?), ?), updated_at = ?
    WHERE id IN (?) AND status = 'pending'`,
  /** Running tasks of the types ? whose lease ran out before ?, at most ?, as [id]: the lease recovery's input. */
  expiredOfTypes: "SELECT id FROM tasks WHERE type IN (?) AND status = 'running' AND lease_until < ? LIMIT ?",
  /** Tasks of type ? under a lease not run out by ?: what a maxConcurrency of the type counts, fleet-wide. */
  leasedOfType: "SELECT COUNT(*) FROM tasks WHERE type = ? AND status = 'running' AND lease_until >= ?",
  /** When the next task of type ? falls due, or its next lease runs out: [pending run_at, running lease_until] in ms. */
  nextOfType: `SELECT
    (SELECT ${ms('MIN(run_at)')} FROM tasks WHERE type = ? AND status = 'pending'),
    (SELECT ${ms('MIN(lease_until)')} FROM tasks WHERE type = ? AND status = 'running')`,
  /** The tasks among ?, locked: what a group of acks finds before it writes. */
  lockByIds: `SELECT ${TASK_COLUMNS} FROM tasks WHERE id IN (?) ORDER BY id FOR UPDATE`,
  /** Acks of one lease (one token): done, for those among ? whose lease ? is held at ?; last_error cleared (it describes the latest run). */
  ackMany: `UPDATE tasks SET status = 'done', finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL, last_error = NULL,
    last_duration_ms = TIMESTAMPDIFF(MICROSECOND, updated_at, ?) DIV 1000
    WHERE id IN (?) AND status = 'running' AND lease_owner = ? AND lease_until >= ?`,
  /** The worker's nack: pending again at ? (or failed for good when ? is null), with its error, while the lease is held. */
  nack: `UPDATE tasks SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL,
    updated_at = ? WHERE ${HELD}`,
  /** The worker's extend: the lease runs until ?, while it is held. */
  extend: `UPDATE tasks SET lease_until = ? WHERE ${HELD}`,
} as const;
