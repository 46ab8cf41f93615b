/**
 * Every statement about the punctual_task_runs table: one row per run of a task (store/run-history.ts runs
 * them). Times come back as epoch milliseconds computed by the server (rows.ts), as in the tasks
 * catalogue.
 */
import { ms } from '../rows.js';

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
  /** A task's runs, newest first, before the run id ? (the (task_id, id) index). */
  ofTask: `SELECT ${RUN_COLUMNS} FROM punctual_task_runs WHERE task_id = ? AND id < ? ORDER BY id DESC LIMIT ?`,
  /**
   * The runs that finished at or after ? (the (finished_at) index), by outcome, with how many
   * waited for a pause or a limit, as [outcome, runs, waited]: the whole fleet's, from the table.
   */
  finishedSince: 'SELECT outcome, COUNT(*), SUM(waited_ms > 0) FROM punctual_task_runs WHERE finished_at >= ? GROUP BY outcome',
  /** The lateness at rank ? (from 0) among the runs that started and finished at or after ? (lost runs never started). */
  latenessAtRank: "SELECT lateness_ms FROM punctual_task_runs WHERE finished_at >= ? AND outcome <> 'lost' ORDER BY lateness_ms LIMIT 1 OFFSET ?",
  /**
   * A lease that ran out is a run that never reported (its process died mid-run): recorded from
   * the locked task before its repair writes it, its start read from the lateness the claim
   * stored (and its wait, lateness_ms + waited_ms after run_at). Among ? (ids), running with a
   * lease that ran out before ?, as of ? (the finish).
   */
  insertLost: `INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, http_status, process,
      waited_ms, wait_reason)
    SELECT id, attempts, 'lost', run_at, run_at + INTERVAL (COALESCE(lateness_ms, 0) + COALESCE(waited_ms, 0)) * 1000 MICROSECOND, ?,
      COALESCE(lateness_ms, 0), 0, '${LOST_ERROR}', NULL, ${HOLDER}, COALESCE(waited_ms, 0), NULL
    FROM punctual_tasks WHERE id IN (?) AND status = 'running' AND lease_until < ?`,
} as const;
