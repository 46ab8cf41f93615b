/**
 * Every statement about the task_runs table: one row per run of a task (store/run-history.ts runs
 * them). Times come back as epoch milliseconds computed by the server (rows.ts), as in the tasks
 * catalogue.
 */
import { ms } from '../rows.js';

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
].join(', ');

export const TASK_RUNS = {
  /**
   * `rows` runs at once: a batch's runs share one statement, in the transaction that records
   * their outcomes on the tasks.
   */
  insert: (rows: number) =>
    'INSERT INTO task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, http_status, process) VALUES ' +
    Array.from({ length: rows }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', '),
  /** A task's runs, newest first, before the run id ? (the (task_id, id) index). */
  ofTask: `SELECT ${RUN_COLUMNS} FROM task_runs WHERE task_id = ? AND id < ? ORDER BY id DESC LIMIT ?`,
  /**
   * A lease that ran out is a run that never reported (its process died mid-run): recorded from
   * the locked task before its repair writes it, its start read from the lateness the claim
   * stored. Among ? (ids), running with a lease that ran out before ?, as of ? (the finish).
   */
  insertLost: `INSERT INTO task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, http_status, process)
    SELECT id, attempts, 'lost', run_at, run_at + INTERVAL COALESCE(lateness_ms, 0) * 1000 MICROSECOND, ?,
      COALESCE(lateness_ms, 0), 0, 'lease expired: the process running it stopped answering', NULL, COALESCE(lease_owner, '')
    FROM tasks WHERE id IN (?) AND status = 'running' AND lease_until < ?`,
} as const;
