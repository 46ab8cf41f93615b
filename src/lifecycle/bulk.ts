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
import {
  EARLIEST_INSTANT_MS,
  LATEST_INSTANT_MS,
  type FinishedStatus,
  type PickCursor,
  type Selector,
  type Status,
  type TypeWalk,
} from '../store/task-types.js';
import { PAST_TOLERANCE_MS } from '../contract/limits.js';
import { arm, disarm, type TimerEffect } from './effects.js';
import { expectAll } from './expect.js';

export const BULK_CHUNK = 500;

/** A move to one instant (refused before it gets here when past, unless asked), or by a duration: allowPast lets a shift land in the past. */
export type BulkMove = { runAt: number; timezone: string | null } | { shiftMs: number; requestId: string; allowPast?: boolean };

export interface BulkCounts {
  matched: number;
  changed: number;
}

/** A bulk change: what it does to each task it picks. */
export type BulkChange =
  | { kind: 'cancel' }
  /** failed → pending, due now, attempts reset, each in its zone: what a retry without a time does. */
  | { kind: 'retry' }
  /** Deleted with its runs: a task in `status` (a finished one), which it must still be in. */
  | { kind: 'delete'; status: FinishedStatus }
  | { kind: 'move'; move: BulkMove };

/** How a bulk change goes through the tasks: in which status, in which passes, and what it does to a chunk of ids. */
interface BulkSteps {
  status: Status;
  walks: readonly TypeWalk[];
  chunk(ids: number[]): Promise<{ changed: number; effects: TimerEffect[] }>;
}

function stepsOf(store: TaskStore, change: BulkChange, now: () => number): BulkSteps {
  switch (change.kind) {
    case 'cancel':
      return {
        status: 'pending',
        walks: [{}],
        chunk: async (ids) => {
          const changed = await store.changes.cancel(ids, now());
          // A task of the chunk that was no longer pending has no timer of ours to keep either.
          return { changed, effects: changed > 0 ? ids.map(disarm) : [] };
        },
      };
    case 'retry':
      return {
        status: 'failed',
        walks: [{}],
        chunk: async (ids) => {
          const at = now();
          const changed = await store.changes.retryInZone(ids, at, at);
          // One that was no longer failed is not armed again: the arming checks the table anyway.
          return { changed, effects: changed > 0 ? ids.map((id) => arm(id, at, undefined, undefined)) : [] };
        },
      };
    case 'delete':
      return {
        status: change.status,
        walks: [{}],
        chunk: async (ids) => ({ changed: (await store.changes.deleteIn(ids, [change.status])).length, effects: [] }),
      };
    case 'move':
      return { status: 'pending', walks: typeWalks(change.move), chunk: (ids) => moveChunk(store, ids, change.move, now()) };
  }
}

/**
 * Applies `change` to every task `selector` picks in the status it changes, `chunk` ids at a
 * time: picked without locks after a cursor, changed conditionally, `apply` given the effects of
 * each chunk after its write. A selector by type walks the type's tasks in run_at order (the index
 * it has), which a move changes: a move's passes never meet a task it moved (typeWalks).
 */
export async function bulkChange(
  store: TaskStore,
  selector: Selector,
  change: BulkChange,
  now: () => number,
  apply: (effects: TimerEffect[]) => void,
  chunk = BULK_CHUNK,
): Promise<BulkCounts> {
  const steps = stepsOf(store, change, now);
  const counts = { matched: 0, changed: 0 };
  for (const walk of 'type' in selector ? steps.walks : [{}]) {
    let cursor: PickCursor | undefined;
    for (;;) {
      const picked = await store.changes.pick(selector, steps.status, cursor, chunk, walk);
      if (picked.length === 0) break;
      counts.matched += picked.length;
      const result = await steps.chunk(picked.map((row) => row.id));
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

/** Moves the pending ones among `ids`, locked in one transaction; a shift skips those its requestId moved already. */
function moveChunk(store: TaskStore, ids: number[], move: BulkMove, now: number): Promise<{ changed: number; effects: TimerEffect[] }> {
  return store.transaction(async (conn) => {
    const pending = await store.changes.lockPendingToMove(conn, ids);
    if ('shiftMs' in move) {
      // A task the shift would move out of the instants a task may take stays where it is, and so
      // does one it would move into the past unless the request allows it (it then runs at once).
      const earliest = move.allowPast === true ? EARLIEST_INSTANT_MS : Math.max(EARLIEST_INSTANT_MS, now - PAST_TOLERANCE_MS);
      const inRange = (at: number) => at >= earliest && at <= LATEST_INSTANT_MS;
      const todo = pending.filter((task) => task.requestId !== move.requestId && inRange(task.runAt + move.shiftMs));
      const shifted = await store.changes.shiftBy(
        conn,
        todo.map((task) => task.id),
        move.shiftMs,
        move.requestId,
        now,
      );
      expectAll('shift', shifted, todo.length);
      return {
        changed: todo.length,
        effects: todo.map((task) => arm(task.id, Math.max(task.runAt + move.shiftMs, now), task.priority, task.type)),
      };
    }
    const todo = pending.filter((task) => task.runAt !== move.runAt || (move.timezone !== null && task.timezone !== move.timezone));
    const moved = await store.changes.moveTo(
      conn,
      todo.map((task) => task.id),
      move.runAt,
      move.timezone,
      now,
    );
    expectAll('move', moved, todo.length);
    return { changed: todo.length, effects: todo.map((task) => arm(task.id, Math.max(move.runAt, now), task.priority, task.type)) };
  });
}
