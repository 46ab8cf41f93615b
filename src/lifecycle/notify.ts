/**
 * The failure notification (NOTIFY_URL): when a task fails for good, a `webhook` task to
 * NOTIFY_URL is written in the same transaction as the failure, so the notice is sent exactly
 * when the failure is on record, signed like every webhook (WEBHOOK_SECRET or the host's own
 * key), retried by the webhook's own attempts, and once: its key names the task and the attempt
 * that failed, so a second write finds the first. The refill arms it as it arms any row written
 * straight into the table. A notification that fails for good notifies nobody (no loop).
 */
import type { Connection } from '../db/connection.js';
import { isReservedKey, RESERVED_KEY_PREFIX, type Task } from '../store/task-types.js';

export interface FailureNotifier {
  url: string;
  /** Attempts of the notification itself. */
  maxAttempts: number;
}

/** A task that failed for good, with its last error and the attempt that failed. */
export interface FinalFailure {
  task: Task;
  attempt: number;
  error: string;
}

const INSERT = `INSERT INTO punctual_tasks (task_key, type, payload, run_at, timezone, max_attempts, misfire, created_at, updated_at)
  VALUES ? ON DUPLICATE KEY UPDATE id = id`;

/** Writes the notifications of `failures` on `conn` (in the transaction of the failures). */
export async function notifyFailures(
  notifier: FailureNotifier | undefined,
  conn: Connection,
  failures: readonly FinalFailure[],
  now: number,
): Promise<void> {
  if (notifier === undefined) return;
  const rows = failures
    .filter(({ task }) => !isReservedKey(task.key))
    .map(({ task, attempt, error }) => {
      const at = new Date(now);
      const body = {
        event: 'task.failed',
        at: at.toISOString(),
        task: {
          id: task.id,
          key: task.key,
          type: task.type,
          attempts: attempt,
          maxAttempts: task.maxAttempts,
          runAt: new Date(task.runAt).toISOString(),
          error,
        },
      };
      return [
        `${RESERVED_KEY_PREFIX}failed:${task.id}:${attempt}`,
        'webhook',
        JSON.stringify({ url: notifier.url, method: 'POST', body }),
        at,
        'UTC',
        notifier.maxAttempts,
        'run',
        at,
        at,
      ];
    });
  if (rows.length > 0) await conn.query(INSERT, [rows]);
}
