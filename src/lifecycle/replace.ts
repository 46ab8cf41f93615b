/**
 * Upsert and debounce: a create with `onKeyConflict: "replace"` whose key names a pending task
 * of the same type (not recurring) gives it the request's payload, zone, priority and instant,
 * and answers the task as it now is (200). A task that is running or finished, or of another
 * type, stays as it is and the create is a conflict (409), as without "replace".
 *
 * The replace is one conditional UPDATE (`status = 'pending'`, invariant 13): it and a claim
 * take the row lock in turn, so a run sees the version before the replace or the one after,
 * never a mix; a replace that comes after the claim finds the task running or done and answers
 * 409, so "replaced" always means the new version is the one that will run.
 *
 * `maxDelayMs` is the debounce's ceiling: the first replace (or create) that gives it fixes the
 * latest instant (first runAt + maxDelayMs), and no replace moves the task past it, however
 * many come.
 * See docs/tasks.md#replace-and-debounce.
 */
import type { TaskStore } from '../store/task-store.js';
import type { Task } from '../store/task-types.js';
import type { CreateRequest, CreateResult } from './create.js';
import { arm } from './effects.js';

/** Whether a create's result may become a replace: its key named another task and the request asked for "replace". */
export function asksReplace(result: CreateResult, request: CreateRequest): boolean {
  return result.outcome === 'conflict' && request.onKeyConflict === 'replace';
}

/** A create's result after "replace", when the request asked for it and the key named a pending task. */
export async function replaceIfAsked(store: TaskStore, result: CreateResult, request: CreateRequest, now: number): Promise<CreateResult> {
  if (!asksReplace(result, request)) return result;
  const existing = result.task;
  if (existing.status !== 'pending' || existing.type !== request.task.type || existing.cron !== null) return result;
  const ceiling = request.maxDelayMs === undefined ? null : existing.requestedRunAt + request.maxDelayMs;
  const replaced = await store.changes.replacePending(existing.id, request.task, ceiling, now);
  const task: Task | undefined = await store.reads.get(existing.id);
  if (task === undefined) return result;
  // Not pending any more (claimed, cancelled): what it is now is the conflict's answer.
  if (!replaced) return { outcome: 'conflict', task, effects: [] };
  return { outcome: 'replaced', task, effects: [arm(task.id, task.runAt, task.priority, task.type)] };
}
