/**
 * The 18 values of a task's row of SQL.insertRows, in its column order, as mysql2 would take them
 * for placeholders: what the intake's hand-written text (TupleWriter) is compared with, in the
 * literal tests and in bench B8.
 */
import type { NewTask } from '../../src/store/task-types.js';

export function insertValues(task: NewTask, now: number): (string | number | Date | null)[] {
  const at = new Date(now);
  const runAt = new Date(task.runAt);
  return [
    task.key,
    task.type,
    JSON.stringify(task.payload),
    runAt,
    runAt,
    task.timezone,
    task.maxAttempts,
    task.misfire,
    task.cron,
    task.tags === undefined || task.tags.length === 0 ? null : JSON.stringify(task.tags),
    at,
    at,
    task.priority ?? 0,
    task.latestRunAt === undefined || task.latestRunAt === null ? null : new Date(task.latestRunAt),
    task.expireAfterMs ?? null,
    task.group ?? null,
    task.traceParent ?? null,
    task.traceState ?? null,
  ];
}
