/**
 * The transitions of a run: claim (the pending, due tasks among the fired ids, `FOR UPDATE SKIP
 * LOCKED`; an outside task leased in the same transaction), complete and fail (backoff, or failed
 * for good; the next occurrence of a recurring task). Invariant 13: every settle is conditional: on
 * the rows the claim locked (expect.ts), or on the run it settles (lease and attempt, or pending as
 * claimed), so a late settle writes nothing.
 * See docs/architecture.md#the-lifecycle.
 */
import type { Connection } from '../db/connection.js';
import { rootMessage, schemaOrGrantError } from '../db/errors.js';
import { PermanentError } from '../handlers/handler.js';
import { RetryLater } from '../handlers/retry-after.js';
import type { TaskStore } from '../store/task-store.js';
import type { CallRecord, Failure, LeasedRun, Task } from '../store/task-types.js';
import type { Wait } from '../store/task-types.js';
import { arm, type TimerEffect } from './effects.js';
import { expectAll } from './expect.js';
import { nextOccurrences } from './recur.js';
import { retryAt, type BackoffPolicy } from './backoff.js';
import { failureOutcome, recordRuns, runOf, type RunRecorder, type RunTimes } from './history.js';
import { notifyFailures, type FailureNotifier } from './notify.js';

export interface Failed {
  task: Task;
  failure: Failure;
}

/** A write that needs its lease: whether it was still held (the row written), and the timers. */
export interface Settled {
  recorded: boolean;
  effects: TimerEffect[];
}

/** Retry with backoff, or failed for good: what becomes of a task whose attempt `attemptsUsed` threw `error`. */
export function failureOf(policy: BackoffPolicy, task: Task, attemptsUsed: number, error: unknown, now: number): Failure {
  // An error of the shop's schema or grants (an unknown column, a missing procedure, access
  // denied) fails at once: a retry would only delay the failure and fill the history.
  const schema = error instanceof PermanentError ? undefined : schemaOrGrantError(error);
  const permanent = error instanceof PermanentError || schema !== undefined;
  const asked = error instanceof RetryLater ? error.afterMs : undefined;
  return {
    id: task.id,
    error: schema === undefined ? rootMessage(error) : `${schema}: an error of the schema or the grants, not retried`,
    retryAt: permanent ? null : retryAt(policy, attemptsUsed, task.maxAttempts, now, asked),
  };
}

/** A task that cannot run at all (no handler, a payload its handler refuses): failed for good. */
export function unrunnable(task: Task, error: string): Failed {
  return { task, failure: { id: task.id, error, retryAt: null } };
}

/** Locks the pending, due tasks among `ids`, in id order. */
export function claim(store: TaskStore, conn: Connection, ids: number[], now: number): Promise<Task[]> {
  return store.runs.lockDue(conn, ids, now);
}

/** Claims locked tasks for an outside run: running, one attempt counted, leased to `owner` until `leaseUntil`. */
export async function lease(
  store: TaskStore,
  conn: Connection,
  tasks: Task[],
  owner: string,
  leaseUntil: number,
  now: number,
): Promise<void> {
  const ids = tasks.map((task) => task.id);
  expectAll('lease', await store.runs.markRunning(conn, ids, owner, leaseUntil, now, waitsOf(tasks)), ids.length);
}

/** How long and what for each of `tasks` that waited for its type waited, by id. */
export function waitsOf(tasks: readonly Task[]): Map<number, Wait> {
  return new Map(tasks.filter((task) => (task.waited?.ms ?? 0) > 0).map((task) => [task.id, task.waited!]));
}

/**
 * Tasks run in this transaction (started at `now`) are done; recurring ones get their next
 * occurrence. `finish`: when the runs ended and, with the run history on, the process that ran
 * them: a successful run is on record in its task's row (store/run-history.ts).
 */
export async function complete(
  store: TaskStore,
  conn: Connection,
  tasks: Task[],
  now: number,
  results?: ReadonlyMap<number, string>,
  finish?: { at: number; by: string | null },
): Promise<TimerEffect[]> {
  const ids = tasks.map((task) => task.id);
  expectAll('complete', await store.runs.markDone(conn, ids, now, waitsOf(tasks), results, finish), ids.length);
  return nextOccurrences(store, conn, tasks, now);
}

/** Failed runs in this transaction (the attempt counted here): retried with backoff or failed for good. */
export async function fail(store: TaskStore, conn: Connection, failed: Failed[], now: number): Promise<TimerEffect[]> {
  const effects: TimerEffect[] = [];
  for (const { task, failure } of failed) {
    expectAll('fail', (await store.runs.failClaimed(conn, failure, task, now)) ? 1 : 0, 1);
    if (failure.retryAt !== null) effects.push(arm(failure.id, failure.retryAt, task.priority, task.type));
  }
  const final = failed.filter(({ failure }) => failure.retryAt === null).map(({ task }) => task);
  effects.push(...(await nextOccurrences(store, conn, final, now)));
  return effects;
}

/** The run an outside handler's claim made of `task` (as the claim locked it): this owner's lease, one attempt more. */
function leasedRun(task: Task, owner: string): LeasedRun {
  return { id: task.id, owner, attempts: task.attempts + 1 };
}

/** An outside run's times: it started at `startedAt` (its claim), ran `call.durationMs`, ended `now`. */
function leasedTimes(startedAt: number, call: CallRecord, now: number): RunTimes {
  return { startedAt, finishedAt: now, durationMs: call.durationMs, httpStatus: call.httpStatus, result: call.result ?? null };
}

/**
 * Completes an outside run, keeping its `call`, if it is still the run `owner` leased (`task` as
 * the claim locked it). Its run is on record in the task's row (its start is the claim's, which
 * the lease stored as its lateness): with the run history on, the row names this process.
 */
export function completeLeased(
  store: TaskStore,
  task: Task,
  owner: string,
  call: CallRecord,
  now: number,
  recorder?: RunRecorder,
): Promise<Settled> {
  return store.transaction(async (conn) => {
    const recorded = await store.runs.completeLeased(conn, leasedRun(task, owner), call, now, recorder?.process ?? null);
    if (!recorded) return { recorded, effects: [] };
    return { recorded, effects: await nextOccurrences(store, conn, [task], now) };
  });
}

/** Records a failed outside run (its attempt counted by the claim) and its `call`, if it is still the run `owner` leased. */
export function failLeased(
  store: TaskStore,
  task: Task,
  failure: Failure,
  owner: string,
  call: CallRecord,
  now: number,
  recorder?: RunRecorder,
  startedAt = now,
  notify?: FailureNotifier,
): Promise<Settled> {
  const write = (conn: Connection) => store.runs.failLeased(conn, failure, leasedRun(task, owner), call, now);
  return failOnItsOwn(store, task, failure, write, leasedTimes(startedAt, call, now), now, recorder, notify);
}

/**
 * Records a failed run whose batch rolled back (a handler that overran and took its transaction,
 * and its claim, with it), counting the attempt, if the task is still pending as `task` was
 * claimed: a cancel or a reschedule that took the row meanwhile stays as it is.
 */
export function failRolledBack(
  store: TaskStore,
  task: Task,
  failure: Failure,
  now: number,
  recorder?: RunRecorder,
  startedAt = now,
  notify?: FailureNotifier,
): Promise<Settled> {
  const write = (conn: Connection) => store.runs.failClaimed(conn, failure, task, now);
  return failOnItsOwn(store, task, failure, write, { startedAt, finishedAt: now }, now, recorder, notify);
}

/**
 * A failed run written in a transaction of its own by `write` (conditional on the run it expects):
 * when written, its failure notice and its run row go with it.
 */
function failOnItsOwn(
  store: TaskStore,
  task: Task,
  failure: Failure,
  write: (conn: Connection) => Promise<boolean>,
  times: RunTimes,
  now: number,
  recorder: RunRecorder | undefined,
  notify: FailureNotifier | undefined,
): Promise<Settled> {
  return store.transaction(async (conn) => {
    const recorded = await write(conn);
    if (recorded && failure.retryAt === null)
      await notifyFailures(notify, conn, [{ task, attempt: task.attempts + 1, error: failure.error }], now);
    if (recorded && recorder !== undefined) {
      await recordRuns(recorder, conn, [runOf(recorder, task, failureOutcome(failure), failure.error, times)]);
    }
    return afterFailure(store, conn, task, failure, recorded, now);
  });
}

/** What a failure written on its own (`recorded`) asks for: the retry's timer, or the next occurrence. */
async function afterFailure(
  store: TaskStore,
  conn: Connection,
  task: Task,
  failure: Failure,
  recorded: boolean,
  now: number,
): Promise<Settled> {
  if (!recorded) return { recorded, effects: [] };
  if (failure.retryAt !== null) return { recorded, effects: [arm(task.id, failure.retryAt, task.priority, task.type)] };
  return { recorded, effects: await nextOccurrences(store, conn, [task], now) };
}
