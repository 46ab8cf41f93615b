/**
 * Bulk changes: cancel or move every pending task with a tag, a key prefix, a type or an id among
 * a list, or retry every failed one, by the same
 * transitions as a single change, BULK_CHUNK ids at a time: picked without locks after a cursor,
 * changed in one short transaction conditional on `status = 'pending'`, effects applied after its
 * COMMIT. Invariant 13: a task that fires meanwhile is not changed. A shift stamps its requestId on
 * each task it moves, so a repeat or a resume moves nothing twice.
 * See docs/architecture.md#the-lifecycle.
 */
import type { TaskStore } from '../store/task-store.js';
import type { FinishedStatus, PickCursor, Selector, Status, TypeWalk } from '../store/task-types.js';
import { arm, disarm, type TimerEffect } from './effects.js';
import { expectAll } from './expect.js';

export const BULK_CHUNK = 500;

export type BulkMove = { runAt: number; timezone: string | null } | { shiftMs: number; requestId: string };

export interface BulkCounts {
  matched: number;
  changed: number;
}

/**
 * Walks the selected tasks in `status` a chunk at a time; `change` answers what it changed and its
 * effects. A selector by type walks the type's tasks in run_at order (the index it has), which a
 * move changes: `walks` are the passes that never meet a moved task again (typeWalks).
 */
async function chunked(
  store: TaskStore,
  selector: Selector,
  change: (ids: number[]) => Promise<{ changed: number; effects: TimerEffect[] }>,
  apply: (effects: TimerEffect[]) => void,
  chunk: number,
  status: Status = 'pending',
  walks: readonly TypeWalk[] = [{}],
): Promise<BulkCounts> {
  const counts = { matched: 0, changed: 0 };
  for (const walk of 'type' in selector ? walks : [{}]) {
    let cursor: PickCursor | undefined;
    for (;;) {
      const picked = await store.changes.pick(selector, status, cursor, chunk, walk);
      if (picked.length === 0) break;
      counts.matched += picked.length;
      const result = await change(picked.map((row) => row.id));
      counts.changed += result.changed;
      apply(result.effects);
      cursor = picked[picked.length - 1]!.cursor;
      if (picked.length < chunk) break;
    }
  }
  return counts;
}

/**
 * The passes of a move over a type's tasks in run_at order, so that none meets a task it moved: a
 * shift later walks from the latest back (a moved task lands behind the walk), a shift earlier
 * from the earliest on; a move to one instant walks the tasks already at it, then those before
 * it and those after it, each pass bounded so that the instant is outside it.
 */
export function typeWalks(move: BulkMove): TypeWalk[] {
  if ('shiftMs' in move) return [{ descending: move.shiftMs > 0 }];
  return (['=', '<', '>'] as const).map((op) => ({ runAt: { op, at: move.runAt } }));
}

/**
 * Deletes every task in `status` (a finished one: failed, done, cancelled, skipped) that
 * `selector` picks, with its runs, a chunk at a time; a task that left the status meanwhile stays.
 */
export function bulkDelete(
  store: TaskStore,
  selector: Selector,
  status: FinishedStatus,
  apply: (effects: TimerEffect[]) => void,
  chunk = BULK_CHUNK,
): Promise<BulkCounts> {
  return chunked(
    store,
    selector,
    async (ids) => ({ changed: (await store.changes.deleteIn(ids, [status])).length, effects: [] }),
    apply,
    chunk,
    status,
  );
}

export function bulkCancel(
  store: TaskStore,
  selector: Selector,
  now: () => number,
  apply: (effects: TimerEffect[]) => void,
  chunk = BULK_CHUNK,
): Promise<BulkCounts> {
  return chunked(
    store,
    selector,
    async (ids) => {
      const changed = await store.changes.cancel(ids, now());
      // A task of the chunk that was no longer pending has no timer of ours to keep either.
      return { changed, effects: changed > 0 ? ids.map(disarm) : [] };
    },
    apply,
    chunk,
  );
}

export function bulkReschedule(
  store: TaskStore,
  selector: Selector,
  move: BulkMove,
  now: () => number,
  apply: (effects: TimerEffect[]) => void,
  chunk = BULK_CHUNK,
): Promise<BulkCounts> {
  return chunked(
    store,
    selector,
    (ids) =>
      store.transaction(async (conn) => {
        const pending = await store.changes.lockPendingToMove(conn, ids);
        if ('shiftMs' in move) {
          const todo = pending.filter((task) => task.requestId !== move.requestId);
          const shifted = await store.changes.shiftBy(
            conn,
            todo.map((task) => task.id),
            move.shiftMs,
            move.requestId,
            now(),
          );
          expectAll('shift', shifted, todo.length);
          return { changed: todo.length, effects: todo.map((task) => arm(task.id, task.runAt + move.shiftMs, task.priority, task.type)) };
        }
        const todo = pending.filter((task) => task.runAt !== move.runAt || (move.timezone !== null && task.timezone !== move.timezone));
        const moved = await store.changes.moveTo(
          conn,
          todo.map((task) => task.id),
          move.runAt,
          move.timezone,
          now(),
        );
        expectAll('move', moved, todo.length);
        return { changed: todo.length, effects: todo.map((task) => arm(task.id, move.runAt, task.priority, task.type)) };
      }),
    apply,
    chunk,
    'pending',
    typeWalks(move),
  );
}

/**
 * failed → pending, due now, attempts reset, for every failed task `selector` picks: what a
 * single retry without a time does, a chunk at a time. Each task keeps its zone.
 */
export function bulkRetry(
  store: TaskStore,
  selector: Selector,
  now: () => number,
  apply: (effects: TimerEffect[]) => void,
  chunk = BULK_CHUNK,
): Promise<BulkCounts> {
  return chunked(
    store,
    selector,
    async (ids) => {
      const at = now();
      const changed = await store.changes.retryInZone(ids, at, at);
      // One that was no longer failed is not armed again: arming is a wish the refill checks anyway.
      return { changed, effects: changed > 0 ? ids.map((id) => arm(id, at, undefined, undefined)) : [] };
    },
    apply,
    chunk,
    'failed',
  );
}
