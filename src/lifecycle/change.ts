/**
 * The shop's changes to a task that exists: cancel (by id or key; for a recurring task, its
 * series), reschedule a pending task, retry a failed one. Each is one conditional UPDATE: the
 * affected rows say whether the task was in the state the change needs, so a change racing a
 * run (or another change) either happens whole or is refused with the task as it is now.
 */
import type { TaskStore } from '../store/task-store.js';
import type { Task } from '../store/task-types.js';
import { arm, disarm, type TimerEffect } from './effects.js';

/** A change that happened (the task after it), or was refused (the task as it is now). */
export type ChangeResult =
  | { outcome: 'changed'; task: Task; effects: TimerEffect[] }
  | { outcome: 'refused'; task: Task; effects: TimerEffect[] }
  | { outcome: 'missing'; effects: TimerEffect[] };

/** Where a moved task goes: its new instant and the zone it was read in. */
export interface Placement {
  runAt: number;
  timezone: string;
}

async function after(store: TaskStore, id: number, changed: boolean, effects: TimerEffect[]): Promise<ChangeResult> {
  const task = await store.reads.get(id);
  if (task === undefined) return { outcome: 'missing', effects: changed ? effects : [] };
  return changed ? { outcome: 'changed', task, effects } : { outcome: 'refused', task, effects: [] };
}

/**
 * Cancels a pending task. For a recurring task that is no longer pending, the series' pending
 * occurrence is cancelled instead: cancelling stops the series. Refused (with the task) when
 * nothing pending was found.
 */
export async function cancel(store: TaskStore, task: Task, now: number): Promise<ChangeResult> {
  const target = task.status !== 'pending' && task.cron !== null ? await store.reads.pendingOccurrence(task.seriesId ?? task.id) : task;
  if (target !== undefined && (await store.changes.cancel([target.id], now)) === 1)
    return after(store, target.id, true, [disarm(target.id)]);
  return after(store, task.id, false, []);
}

/** Moves a pending task to `place(task)`. Refused when it is not pending. */
export async function reschedule(store: TaskStore, task: Task, place: Placement, now: number): Promise<ChangeResult> {
  const moved = (await store.changes.reschedule([task.id], place.runAt, place.timezone, now)) === 1;
  return after(store, task.id, moved, [arm(task.id, Math.max(place.runAt, now), task.priority, task.type)]);
}

/** What a delete came to: gone (the task as it was), refused (as it is now: running, or a series going on), or missing. */
export type DeleteResult =
  | { outcome: 'deleted'; task: Task; effects: TimerEffect[] }
  | { outcome: 'refused'; task: Task; effects: TimerEffect[] }
  | { outcome: 'missing'; effects: TimerEffect[] };

/** The statuses a task may be deleted in: any but running (its run would settle a row that is gone). */
export const DELETABLE = ['pending', 'done', 'failed', 'cancelled', 'skipped'] as const;

/** Deletes a task that is not running, with its runs; a pending one's timer goes with it. */
export async function deleteTask(store: TaskStore, task: Task): Promise<DeleteResult> {
  const gone = await store.changes.deleteIn([task.id], DELETABLE);
  if (gone.length === 1) return { outcome: 'deleted', task, effects: [disarm(task.id)] };
  const now = await store.reads.get(task.id);
  return now === undefined ? { outcome: 'missing', effects: [] } : { outcome: 'refused', task: now, effects: [] };
}

/** A pending task's payload replaced. Refused when it is not pending. */
export async function editPayload(store: TaskStore, task: Task, payload: unknown, now: number): Promise<ChangeResult> {
  return after(store, task.id, await store.changes.updatePayload(task.id, payload, now), []);
}

/** failed → pending at `place`, its attempts reset. Refused when it is not failed. */
export async function retry(store: TaskStore, task: Task, place: Placement, now: number): Promise<ChangeResult> {
  const moved = (await store.changes.retry([task.id], place.runAt, place.timezone, now)) === 1;
  return after(store, task.id, moved, [arm(task.id, Math.max(place.runAt, now), task.priority, task.type)]);
}
