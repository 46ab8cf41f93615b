/**
 * The statements GET /events reads its stream with: the runs' rows (punctual_task_runs, with their
 * task's type, key and status now) and the changes made through the API (punctual_audit_log) after a
 * position, in id order, by primary key ranges; and the successful runs, on record in their tasks'
 * rows (store/run-history.ts), after a position in the (status, finished_at, run_at, id) index's
 * order. Times come back as epoch milliseconds computed by the server.
 */
import { ms } from '../rows.js';
import { DONE_RUN } from './task-runs.js';

/**
 * A task done after the position (finished_at, run_at, id) given as five values (f, f, r, r, id):
 * the index's order, written out so the range starts at f (rows.ts runAtIs reads the same way).
 */
const DONE_AFTER = '(t.finished_at > ? OR (t.finished_at = ? AND (t.run_at > ? OR (t.run_at = ? AND t.id > ?))))';

export const EVENTS = {
  /** Run rows after the run id ?, up to ?. */
  runsAfter: `SELECT r.id, r.task_id, r.attempt, r.outcome, ${ms('r.finished_at')}, r.error, r.http_status, t.type, t.task_key, t.status
    FROM punctual_task_runs r JOIN punctual_tasks t ON t.id = r.task_id WHERE r.id > ? ORDER BY r.id LIMIT ?`,
  /**
   * Successful runs after a position (from ?, then DONE_AFTER's five), finished by ?, up to ?, in
   * the index's order: [task id, attempt, finished, run_at, http status, type, key].
   */
  doneAfter: `SELECT t.id, t.attempts, ${ms('t.finished_at')}, ${ms('t.run_at')}, t.last_http_status, t.type, t.task_key
    FROM punctual_tasks t WHERE ${DONE_RUN} AND t.finished_at >= ? AND ${DONE_AFTER} AND t.finished_at <= ?
    ORDER BY t.finished_at, t.run_at, t.id LIMIT ?`,
  /** The position of the successful run ? places back from the newest (0: the newest), as [finished, run_at, id]. */
  doneBack: `SELECT ${ms('t.finished_at')}, ${ms('t.run_at')}, t.id FROM punctual_tasks t WHERE ${DONE_RUN}
    ORDER BY t.finished_at DESC, t.run_at DESC, t.id DESC LIMIT 1 OFFSET ?`,
  /** How many successful runs lie after one position (?, DONE_AFTER's five) and up to another (the five again, negated). */
  doneBetween: `SELECT COUNT(*) FROM punctual_tasks t WHERE ${DONE_RUN} AND t.finished_at >= ? AND ${DONE_AFTER} AND NOT ${DONE_AFTER}`,
  /** Changes that took (2xx) after the audit id ?, up to ?. */
  changesAfter: `SELECT id, ${ms('at')}, actor, action, target, status, detail FROM punctual_audit_log WHERE id > ? AND status < 300 ORDER BY id LIMIT ?`,
  /** Where each stream of rows is now. */
  heads:
    'SELECT (SELECT COALESCE(MAX(id), 0) FROM punctual_task_runs) AS runs, (SELECT COALESCE(MAX(id), 0) FROM punctual_audit_log) AS changes',
} as const;
