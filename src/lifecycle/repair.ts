/**
 * The scheduler's repairs, at boot and by the reconcile: skip a misfired task that asked for it (or
 * that waited for its type past the grace: skipLocked), and recover an expired lease (pending again
 * and armed, or failed for good), so nothing is lost (invariant 3). With `shards` a repair reaches
 * only the shards this process owns or just acquired. Ids are read without locks, then locked by id
 * and written conditionally (expect.ts; invariant 13: every settle is conditional).
 * See docs/architecture.md#the-lifecycle.
 */
import type { Connection } from '../db/connection.js';
import type { TaskStore } from '../store/task-store.js';
import type { Task } from '../store/task-types.js';
import { arm, disarm, type TimerEffect } from './effects.js';
import { expectAll } from './expect.js';
import { nextOccurrences } from './recur.js';
import type { RunRecorder } from './history.js';
import { notifyFailures, type FailureNotifier } from './notify.js';

export const SKIPPED_REASON = 'skipped: its time passed while punctual was down';
/** The lastError of a task skipped because it could not start within its expireAfterMs. */
export const EXPIRED_REASON = 'expired: not started within expireAfterMs of its runAt';
/** Misfired tasks locked and skipped per transaction. */
const SKIP_CHUNK = 1000;

export async function skipMisfired(
  store: TaskStore,
  before: number,
  now: number,
  shards?: readonly number[],
): Promise<{ skipped: number; effects: TimerEffect[] }> {
  // Read first, then lock and update by id: a range UPDATE would lock every overdue row it
  // walks past, and deadlock with the batches of a process that is still running them.
  const ids = await store.reads.misfiredIds(before, shards);
  const effects: TimerEffect[] = [];
  let skipped = 0;
  for (let i = 0; i < ids.length; i += SKIP_CHUNK) {
    const chunk = ids.slice(i, i + SKIP_CHUNK);
    const done = await store.transaction(async (conn) => {
      const lapsed = await store.runs.lockMisfired(conn, chunk, before);
      return { count: lapsed.length, effects: await skipLocked(store, conn, lapsed, now, SKIPPED_REASON) };
    });
    skipped += done.count;
    effects.push(...done.effects);
  }
  return { skipped, effects };
}

export const WAITED_REASON = 'skipped: its time passed while its type was paused or over a limit';

/**
 * Locked tasks skipped in the caller's transaction, with `reason` as their lastError: a misfire,
 * a wait for their type past the grace (the default reason), an expiry. Their timers go, and a
 * recurring task's next occurrence comes.
 */
export async function skipLocked(
  store: TaskStore,
  conn: Connection,
  tasks: Task[],
  now: number,
  reason = WAITED_REASON,
): Promise<TimerEffect[]> {
  if (tasks.length === 0) return [];
  const skipped = await store.runs.markSkipped(
    conn,
    tasks.map((task) => task.id),
    reason,
    now,
  );
  expectAll('skip', skipped, tasks.length);
  return [...tasks.map((task) => disarm(task.id)), ...(await nextOccurrences(store, conn, tasks, now))];
}

export interface LeaseRecovery {
  recovered: number;
  failed: number;
  effects: TimerEffect[];
}

/**
 * The expired leases this process may repair now (of `shards` when given) recovered
 * (recoverLeases). The reconcile's and the boot's way in; a pull lease request names its own ids.
 */
export async function recoverExpiredLeases(
  store: TaskStore,
  now: number,
  shards?: readonly number[],
  recorder?: RunRecorder,
  notify?: FailureNotifier,
): Promise<LeaseRecovery> {
  // Read first, then lock by id: a locking range read would lock (and wait for) every running
  // row it walks past, those of other shards too.
  return recoverLeases(store, await store.reads.expiredLeaseIds(now, shards), now, recorder, notify);
}

/**
 * The one lease recovery, for a pushed task (a webhook in flight) and a pulled one (a worker's
 * lease) alike: each of `ids` whose lease is still expired when locked is a run that never
 * reported (on record as lost), then pending again and armed, or failed for good on its last
 * attempt, with its failure notice (NOTIFY_URL) in the same transaction.
 */
export async function recoverLeases(
  store: TaskStore,
  ids: readonly number[],
  now: number,
  recorder?: RunRecorder,
  notify?: FailureNotifier,
): Promise<LeaseRecovery> {
  if (ids.length === 0) return { recovered: 0, failed: 0, effects: [] };
  return store.transaction(async (conn) => {
    const expired = await store.runs.lockExpiredLeases(conn, [...ids], now);
    // Each one a run that never reported: on record before the repair writes its row.
    await recorder?.history.recordLost(
      conn,
      expired.map((task) => task.id),
      now,
      now,
    );
    const spent = expired.filter((task) => task.attempts >= task.maxAttempts);
    const again = expired.filter((task) => task.attempts < task.maxAttempts);
    const failed = await store.runs.failExpiredLeases(
      conn,
      spent.map((task) => task.id),
      now,
    );
    expectAll('fail expired leases', failed, spent.length);
    await notifyFailures(
      notify,
      conn,
      spent.map((task) => ({ task, attempt: task.attempts, error: 'lease expired on its last attempt' })),
      now,
    );
    const released = await store.runs.releaseExpiredLeases(
      conn,
      again.map((task) => task.id),
      now,
    );
    expectAll('release expired leases', released, again.length);
    const next = await nextOccurrences(store, conn, spent, now);
    return {
      recovered: again.length,
      failed: spent.length,
      effects: [...again.map((task) => arm(task.id, task.runAt, task.priority, task.type)), ...next],
    };
  });
}
