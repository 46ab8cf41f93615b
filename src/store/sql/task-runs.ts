/**
 * Every statement about the run history (store/run-history.ts runs them): the punctual_task_runs
 * table, one row per run that failed or was lost (and per run of any outcome a release before
 * 0.2 wrote), and the successful runs, each on record in its task's row. Times come back as
 * epoch milliseconds computed by the server (rows.ts), as in the tasks catalogue.
 */
import { lateFromSql, ms } from '../rows.js';

/** What a lost run, and the task it leaves pending, say. */
export const LOST_ERROR = 'lease expired: the process running it stopped answering';

export const RUN_COLUMNS = [
  'id',
  'task_id',
  'attempt',
  'outcome',
  ms('due_at'),
  ms('started_at'),
  ms('finished_at'),
  'lateness_ms',
  'duration_ms',
  'error',
  'http_status',
  'process',
  'waited_ms',
  'wait_reason',
  'result',
].join(', ');

/**
 * The successful run of a task done with the run history on, read from the task's row in
 * RUN_COLUMNS' order (its id NULL: it has no row of its own). It started where the claim's
 * lateness and wait say (run_at + lateness_ms + waited_ms), ended at finished_at, and ran for the
 * outside call's time or else from its start to its end. `t` is the task.
 */
const STARTED = `${lateFromSql('t.')} + INTERVAL (COALESCE(t.lateness_ms, 0) + COALESCE(t.waited_ms, 0)) * 1000 MICROSECOND`;
export const DONE_RUN_COLUMNS = [
  'NULL',
  't.id',
  't.attempts',
  "'done'",
  ms(lateFromSql('t.')),
  ms(STARTED),
  ms('t.finished_at'),
  'COALESCE(t.lateness_ms, 0)',
  `COALESCE(t.last_duration_ms, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, ${STARTED}, t.finished_at) DIV 1000))`,
  'NULL',
  't.last_http_status',
  't.done_by',
  'COALESCE(t.waited_ms, 0)',
  'IF(t.waited_ms > 0, t.wait_reason, NULL)',
  't.last_result',
].join(', ');

/** A done task whose row is its successful run's record: done with the history on (done_by set). */
export const DONE_RUN = "t.status = 'done' AND t.done_by IS NOT NULL";

/**
 * The holder a lost run names: the process, or for a pull lease (`pull:` and its token) a digest of
 * the token, never the token itself (lifecycle/history.ts leaseHolder).
 */
const HOLDER = "IF(lease_owner LIKE 'pull:%', CONCAT('pull:', LEFT(SHA2(lease_owner, 256), 12)), COALESCE(lease_owner, ''))";

export const TASK_RUNS = {
  /**
   * `rows` runs at once: a batch's runs share one statement, in the transaction that records
   * their outcomes on the tasks.
   */
  insert: (rows: number) =>
    'INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, http_status, process, waited_ms, wait_reason, result) VALUES ' +
    Array.from({ length: rows }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', '),
  /** The runs of the tasks ? (the (task_id, id) index): retention deletes them with their tasks. */
  deleteOfTasks: 'DELETE FROM punctual_task_runs WHERE task_id IN (?)',
  /** A task's rows, newest first, before the run id ? (the (task_id, id) index). */
  ofTask: `SELECT ${RUN_COLUMNS} FROM punctual_task_runs WHERE task_id = ? AND id < ? ORDER BY id DESC LIMIT ?`,
  /** The successful run of the task ?, from its row, if it is done with the history on: always its latest run. */
  doneOfTask: `SELECT ${DONE_RUN_COLUMNS} FROM punctual_tasks t WHERE t.id = ? AND ${DONE_RUN}`,
  /**
   * The rows of the runs that finished at or after ? (the (finished_at) index), by outcome, with
   * how many waited for a pause or a limit, as [outcome, runs, waited]: the whole fleet's.
   */
  finishedSince: 'SELECT outcome, COUNT(*), SUM(waited_ms > 0) FROM punctual_task_runs WHERE finished_at >= ? GROUP BY outcome',
  /** The same of the successful runs on record in their tasks' rows, as [runs, waited]: the (status, finished_at) index. */
  doneSince: `SELECT COUNT(*), SUM(t.waited_ms > 0) FROM punctual_tasks t WHERE ${DONE_RUN} AND t.finished_at >= ?`,
  /**
   * The lateness at rank ? (from 0) among the runs that started and finished at or after ?, twice
   * (lost runs never started): the rows, and the successful runs in their tasks' rows.
   */
  latenessAtRank: `SELECT lateness_ms FROM (
      SELECT lateness_ms FROM punctual_task_runs WHERE finished_at >= ? AND outcome <> 'lost'
      UNION ALL SELECT COALESCE(t.lateness_ms, 0) FROM punctual_tasks t WHERE ${DONE_RUN} AND t.finished_at >= ?
    ) AS started ORDER BY lateness_ms LIMIT 1 OFFSET ?`,
  /**
   * A lease that ran out is a run that never reported (its process died mid-run): recorded from
   * the locked task before its repair writes it, its start read from the lateness the claim
   * stored (and its wait, lateness_ms + waited_ms after run_at). Among ? (ids), running with a
   * lease that ran out before ?, as of ? (the finish).
   */
  insertLost: `INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, http_status, process,
      waited_ms, wait_reason)
    SELECT id, attempts, 'lost', ${lateFromSql()}, ${lateFromSql()} + INTERVAL (COALESCE(lateness_ms, 0) + COALESCE(waited_ms, 0)) * 1000 MICROSECOND, ?,
      COALESCE(lateness_ms, 0), 0, '${LOST_ERROR}', NULL, ${HOLDER}, COALESCE(waited_ms, 0), NULL
    FROM punctual_tasks WHERE id IN (?) AND status = 'running' AND lease_until < ?`,
} as const;
