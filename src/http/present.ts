/**
 * A task as the API shows it: times as ISO-8601 strings, runAtLocal in the task's zone.
 *
 * A read token (the dashboard's, a monitor's) sees the names of a payload's `headers` but every
 * value as `***`: shops put their receivers' credentials there, and a name does not tell which
 * value is one (`X-Shop-Sig`, `X-Hmac`…), so no value is shown rather than a guess. write and
 * admin tokens, which may create such tasks anyway, see them whole. No role (auth sets one on
 * every route that is not public) is shown the masked form.
 */
import { leaseHolder } from '../lifecycle/history.js';
import type { Task } from '../store/task-types.js';
import { toIsoLocal, toIsoUtc } from '../time/zones.js';
import type { Role } from '../contract/auth.js';
import type { TaskJson } from '../contract/tasks.js';
import { allows } from './roles.js';

export const MASKED = '***';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The payload as `role` may see it. */
function shownPayload(payload: unknown, role: Role | undefined): unknown {
  if (role !== undefined && allows(role, 'write')) return payload;
  if (!isRecord(payload) || !isRecord(payload.headers)) return payload;
  return { ...payload, headers: Object.fromEntries(Object.keys(payload.headers).map((name) => [name, MASKED])) };
}

/** `task` as a caller with `role` is shown it (the request's role, from auth.ts). */
export function present(task: Task, role: Role | undefined): TaskJson {
  return {
    id: task.id,
    key: task.key,
    type: task.type,
    payload: shownPayload(task.payload, role),
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
    lastResult: task.lastResult ?? null,
    priority: task.priority,
    expireAfterMs: task.expireAfterMs,
    group: task.group,
    // A running task's lease, the pull token behind a digest (lifecycle/history.ts leaseHolder).
    ...(task.status === 'running' && task.leaseOwner !== null && task.leaseUntil !== null
      ? {
          leaseHolder: task.leaseOwner.startsWith('pull:') ? leaseHolder(task.leaseOwner) : task.leaseOwner,
          leaseUntil: toIsoUtc(task.leaseUntil),
        }
      : {}),
  };
}
