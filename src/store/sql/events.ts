/**
 * The statements GET /events reads its stream with: the runs (punctual_task_runs, with their task's type,
 * key and status now) and the changes made through the API (punctual_audit_log) after a position, in id
 * order, by primary key ranges. Times come back as epoch milliseconds computed by the server.
 */
import { ms } from '../rows.js';

export const EVENTS = {
  /** Runs after the run id ?, up to ?. */
  runsAfter: `SELECT r.id, r.task_id, r.attempt, r.outcome, ${ms('r.finished_at')}, r.error, r.http_status, t.type, t.task_key, t.status
    FROM punctual_task_runs r JOIN punctual_tasks t ON t.id = r.task_id WHERE r.id > ? ORDER BY r.id LIMIT ?`,
  /** Changes that took (2xx) after the audit id ?, up to ?. */
  changesAfter: `SELECT id, ${ms('at')}, actor, action, target, status, detail FROM punctual_audit_log WHERE id > ? AND status < 300 ORDER BY id LIMIT ?`,
  /** Where each stream is now. */
  heads:
    'SELECT (SELECT COALESCE(MAX(id), 0) FROM punctual_task_runs) AS runs, (SELECT COALESCE(MAX(id), 0) FROM punctual_audit_log) AS changes',
} as const;
