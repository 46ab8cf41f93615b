/** A task as the API shows it: times as ISO-8601 strings, runAtLocal in the task's zone. */
import type { Task } from '../store/task-store.js';
import { toIsoLocal, toIsoUtc } from '../time/zones.js';
import type { TaskJson } from '../contract/tasks.js';

export function present(task: Task): TaskJson {
  return {
    id: task.id,
    key: task.key,
    type: task.type,
    payload: task.payload,
    status: task.status,
    runAt: toIsoUtc(task.runAt),
    runAtLocal: toIsoLocal(task.runAt, task.timezone),
    timezone: task.timezone,
    attempts: task.attempts,
    maxAttempts: task.maxAttempts,
    misfire: task.misfire,
    lastError: task.lastError,
    createdAt: toIsoUtc(task.createdAt),
    updatedAt: toIsoUtc(task.updatedAt),
    finishedAt: task.finishedAt === null ? null : toIsoUtc(task.finishedAt),
    cron: task.cron,
    seriesId: task.seriesId,
    tags: task.tags,
    latenessMs: task.latenessMs,
    lastHttpStatus: task.lastHttpStatus,
    lastDurationMs: task.lastDurationMs,
    lastResponseBytes: task.lastResponseBytes,
  };
}
