/**
 * Create, with key dedup: a create whose `key` is taken does not insert; the existing task is
 * compared with the request. The same type, payload (deep-equal), instant and cron is the same
 * request again (a client's retry): it gets the existing task, whatever its status now (200).
 * Anything else is a conflict (409) carrying the existing task.
 *
 * "The same instant" is the one the shop asked for (requestedRunAt), not the task's runAt now: a
 * failed attempt's backoff moves runAt, and a create retried after a timeout must still be
 * recognised. A reschedule (or a bulk move, or a retry of a failed task) is the shop asking for
 * another instant, so the old create is a conflict after it. For `delayMs`, "the same instant"
 * is the same delay after the existing task's creation (createdAt + delayMs = the asked instant).
 *
 * A batch is many creates at once with the same rules: its tasks are written together (one
 * transaction, multi-row INSERTs, one query for the keys already taken; intake.ts), and each item
 * is answered as its create would be.
 */
import { isDeepStrictEqual } from 'node:util';
import type { TaskStore } from '../store/task-store.js';
import type { InsertResult, NewTask, Task } from '../store/task-types.js';
import { armCreated, type TimerEffect } from './effects.js';

export interface CreateRequest {
  task: NewTask;
  /** When the request gave delayMs instead of runAt: compared against the existing task's creation. */
  delayMs?: number;
  /** The spread's offset (spreadMs) added to the instant asked for; part of it, as delayMs is. */
  offsetMs?: number;
  /** "replace": a key that names a pending task gives it this request's content (replace.ts). */
  onKeyConflict?: 'replace';
  /** With "replace": how far past the first runAt replaces may push the task. */
  maxDelayMs?: number;
}

export type CreateResult =
  | { outcome: 'created'; task: Task; effects: TimerEffect[] }
  | { outcome: 'replaced'; task: Task; effects: TimerEffect[] }
  | { outcome: 'repeated'; task: Task; effects: TimerEffect[] }
  | { outcome: 'conflict'; task: Task; effects: TimerEffect[] };

/** Whether `existing` is what `request` would have created. */
export function sameRequest(existing: Task, request: CreateRequest): boolean {
  const { task } = request;
  const asked = request.delayMs !== undefined ? existing.createdAt + request.delayMs + (request.offsetMs ?? 0) : task.runAt;
  return (
    existing.type === task.type &&
    existing.requestedRunAt === asked &&
    existing.cron === task.cron &&
    existing.priority === (task.priority ?? 0) &&
    existing.group === (task.group ?? null) &&
    isDeepStrictEqual(existing.tags, task.tags ?? []) &&
    isDeepStrictEqual(existing.payload, task.payload)
  );
}

function answer(result: InsertResult, request: CreateRequest): CreateResult {
  if (result.created)
    return {
      outcome: 'created',
      task: result.task,
      effects: [armCreated(result.task.id, result.task.runAt, result.task.priority, result.task.type)],
    };
  return { outcome: sameRequest(result.task, request) ? 'repeated' : 'conflict', task: result.task, effects: [] };
}

export async function create(store: TaskStore, request: CreateRequest, now: number): Promise<CreateResult> {
  return answer(await store.changes.insert(request.task, now), request);
}

/** Each request answered as `create` would, in order; the new tasks are all written together, or none. */
export async function createMany(store: TaskStore, requests: readonly CreateRequest[], now: number): Promise<CreateResult[]> {
  const inserted = await store.changes.insertMany(
    requests.map((request) => request.task),
    now,
  );
  return inserted.map((result, i) => answer(result, requests[i]!));
}
