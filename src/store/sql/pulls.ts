/**
 * The statements of pull leases (src/store/pulls.ts): worker types' due tasks leased to a pull
 * worker, and the worker's ack, nack and extend. A pull lease is an outside run's lease
 * (`status = 'running'`, `lease_owner`, `lease_until`), its owner the lease token, so the lease
 * recovery of every other run applies to it as it is. Every settle names the lease it settles and
 * the state it expects (invariant 13): a stale or foreign token, or a lease that ran out, writes
 * nothing. Worker types' rows are read through the (type, status, run_minute, run_at) index, in
 * (run_minute, run_at) order and ranges (rows.ts, runAtRange): run_at's own order, with no sort.
 */
import { lateFromSql, ms, runAtRange, TASK_COLUMNS } from '../rows.js';
import { forceIndex } from './index-hints.js';

const byType = () => forceIndex('tasks_type_status_run_minute_run_at');

/** The held lease `?` of task `?`: running under that token, not run out by `?`. */
const HELD = "id = ? AND status = 'running' AND lease_owner = ? AND lease_until >= ?";

export const PULL_SQL = {
  /**
   * The due pending tasks of the types ? at ? (as runAtValues), oldest first, at most ?, locked
   * (rows another transaction holds are skipped; one past its expireAfterMs is locked too: the
   * claim ends it as expired, lifecycle/pull.ts, a worker never gets it). The order names the
   * table's columns: `run_at` alone would be TASK_COLUMNS' alias of that name, an expression, and
   * sorting on it reads (and locks) every due task of the types before it returns the first few.
   * In the index's order, one type's lease reads and locks only the rows it returns.
   */
  get lockDueOfTypes() {
    return `SELECT ${TASK_COLUMNS} FROM punctual_tasks ${byType()}
    WHERE type IN (?) AND status = 'pending' AND ${runAtRange('<=')}
    ORDER BY punctual_tasks.run_minute, punctual_tasks.run_at, punctual_tasks.id LIMIT ? FOR UPDATE SKIP LOCKED`;
  },
  /**
   * When the next pending task of `types` types (each ? with its instant) falls due after that
   * instant, in ms as `next_due` (NULL: none): the claim's look ahead. The first entry after the
   * instant of each type's range of the index, the earliest of them.
   */
  nextDueOfTypes: (types: number) =>
    `SELECT ${ms('MIN(run_at)')} AS next_due FROM (` +
    Array.from(
      { length: types },
      () =>
        `(SELECT run_at FROM punctual_tasks ${byType()} WHERE type = ? AND status = 'pending' AND ${runAtRange('>')} ORDER BY run_minute, run_at LIMIT 1)`,
    ).join(' UNION ALL ') +
    ') AS next',
  /**
   * Several leases in one statement: the tasks among the last ?, while pending, running from ?
   * (their lateness), one attempt counted, each to the token and lease end at its own place in
   * the two lists (ELT(FIELD(id, ids…), values…)).
   */
  leaseRows: `UPDATE punctual_tasks SET lateness_ms = TIMESTAMPDIFF(MICROSECOND, ${lateFromSql()}, ?) DIV 1000, status = 'running',
    attempts = attempts + 1, lease_owner = ELT(FIELD(id, ?), ?), lease_until = ELT(FIELD(id, ?), ?), updated_at = ?
    WHERE id IN (?) AND status = 'pending'`,
  /** Running tasks of the types ? whose lease ran out before ?, at most ?, as [id]: the lease recovery's input. */
  expiredOfTypes: "SELECT id FROM punctual_tasks WHERE type IN (?) AND status = 'running' AND lease_until < ? LIMIT ?",
  /** Tasks of type ? under a lease not run out by ?: what a maxConcurrency of the type counts, fleet-wide. */
  leasedOfType: "SELECT COUNT(*) FROM punctual_tasks WHERE type = ? AND status = 'running' AND lease_until >= ?",
  /** When the next task of type ? falls due, or its next lease runs out: [pending run_at, running lease_until] in ms. */
  get nextOfType() {
    return `SELECT
    (SELECT ${ms('run_at')} FROM punctual_tasks ${byType()} WHERE type = ? AND status = 'pending' ORDER BY run_minute, run_at LIMIT 1),
    (SELECT ${ms('MIN(lease_until)')} FROM punctual_tasks WHERE type = ? AND status = 'running')`;
  },
  /** The tasks among ?, locked: what a group of acks finds before it writes. */
  lockByIds: `SELECT ${TASK_COLUMNS} FROM punctual_tasks WHERE id IN (?) ORDER BY id FOR UPDATE`,
  /** Acks of one lease (one token): done, for those among ? whose lease ? is held at ?; last_error cleared (it describes the latest run). */
  ackMany: `UPDATE punctual_tasks SET status = 'done', done_by = ?, finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL, last_error = NULL,
    last_duration_ms = TIMESTAMPDIFF(MICROSECOND, updated_at, ?) DIV 1000
    WHERE id IN (?) AND status = 'running' AND lease_owner = ? AND lease_until >= ?`,
  /** The worker's nack: pending again at ? (or failed for good when ? is null), with its error, while the lease is held. */
  nack: `UPDATE punctual_tasks SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL,
    updated_at = ? WHERE ${HELD}`,
  /** The worker's extend: the lease runs until ?, while it is held. */
  extend: `UPDATE punctual_tasks SET lease_until = ? WHERE ${HELD}`,
} as const;
