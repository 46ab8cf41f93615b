/**
 * One try of a batch, in one transaction it opens: claim the due tasks among the ids
 * (`FOR UPDATE SKIP LOCKED`), plan what becomes of each (batch-plan.ts), lease the outside ones,
 * run the database ones (run-database.ts), and record the outcomes, all before COMMIT. A crash or
 * a rollback at any point leaves every task pending as it was, and the runs the type limits
 * admitted for it are handed back as never begun.
 *
 * Locked ahead (time/lock-ahead.ts): the claim takes the tasks due within the lead, and the batch's
 * time is the latest `runAt` it locked; when it is behind by more than the lead (some were due that
 * long ago), it runs the due ones alone, at once, and leaves the others pending for their timers. When every task it runs is a database handler's that locks
 * ahead, on a pipelined transaction, the handlers run at once and only the COMMIT (with the writes
 * it carries) waits for that time; otherwise the batch waits for it before any handler starts.
 * Either way nothing commits, and no outside call or other handler starts, before its `runAt`.
 */
import type { Database } from '../db/connection.js';
import { pipelineOf } from '../db/pipeline.js';
import { ONCE, transaction } from '../db/transaction.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import type { Lifecycle, RunTransaction } from '../lifecycle/lifecycle.js';
import { resultOf } from '../lifecycle/history.js';
import type { DispatchMetrics } from './outcomes.js';
import type { Task } from '../store/task-types.js';
import type { ClaimFence } from '../store/leases.js';
import { planBatch, type BatchPlan } from './batch-plan.js';
import type { TypeAdmission } from './limits.js';
import type { DatabaseExecutor, DatabaseRuns } from './run-database.js';
import { LEASE_MARGIN_MS } from './run-outside.js';
import { until, type Clock } from '../time/clock.js';

/**
 * A batch's transaction may hold its connection this much longer than the slowest handler may
 * run: past that the connection stopped answering, and the batch is tried again.
 */
const BATCH_DEADLINE_MARGIN_MS = 15_000;

/** What a batch's try works with, the same for every try. */
export interface BatchParts {
  database: Database;
  lifecycle: Lifecycle;
  registry: HandlerRegistry;
  limits: TypeAdmission;
  databaseExecutor: DatabaseExecutor;
  /** This process's name in lease_owner. */
  owner: string;
  misfireGraceMs: number;
  mayClaim?: (id: number) => boolean;
  /** SHARDING=on: the shards (at their epochs) a claim of these ids is decided under; the claim holds only while they do. */
  fence?: (ids: readonly number[]) => ClaimFence;
  metrics?: DispatchMetrics;
  clock: Clock;
  /** How long before its runAt a task may be claimed (time/lock-ahead.ts); none: at its runAt. */
  lockAheadMs?: () => number;
  /**
   * A batch with only its COMMIT left, waiting for its runAt, gives its place among the batches
   * back (another can claim meanwhile); answers how to take it again, or undefined if it may not.
   */
  park?: () => (() => void) | undefined;
}

/** How the database handlers run: `fast` first, `careful` (a savepoint per task) after one threw. */
export type RunMode = 'fast' | 'careful';

/** One try of a batch. */
export interface BatchAttempt {
  ids: readonly number[];
  /** The time the try's runs are said to start. */
  now: number;
  mode: RunMode;
  /** Errors of handlers that threw in an earlier try of this batch: recorded, not run again. */
  threw: ReadonlyMap<number, unknown>;
  /** Outside slots this batch reserved. */
  slots: number;
}

export interface BatchResult extends DatabaseRuns, Omit<BatchPlan, 'failures' | 'runnable'> {
  locked: Task[];
  /** Locked ahead of their runAt beside tasks already due: left pending, armed again for their runAt. */
  later: Task[];
  /** The time its runs started by (the try's `now`, or the latest runAt it locked ahead): never before a runAt. */
  at: number;
}

/**
 * One batch's transaction (the transaction runner, one try: the dispatcher retries a batch whole,
 * as it re-reads the clock and its limits for each try), with the lifecycle's run transitions bound
 * to it; the timer effects they ask for are handed back to the lifecycle once COMMIT succeeded.
 * Where the server checks the completion's row count inline and runs a multi-statement text as
 * one transaction, BEGIN and COMMIT travel with the work (db/pipeline.ts).
 */
export async function inBatchTransaction<T>(
  database: Database,
  lifecycle: Lifecycle,
  fn: (tx: RunTransaction) => Promise<T>,
  deadlineMs?: number,
): Promise<T> {
  const { value, effects } = await transaction(
    database,
    async (conn) => {
      const tx = lifecycle.runTransitions(conn);
      const value = await fn(tx);
      await tx.finish();
      return { value, effects: tx.effects };
    },
    { retry: ONCE, deadlineMs, pipelined: await database.pipelines() },
  );
  lifecycle.afterCommit(effects);
  return value;
}

/** Runs one try in its own transaction; on a rollback, its admitted runs are handed back. */
export async function tryBatch(parts: BatchParts, attempt: BatchAttempt): Promise<BatchResult> {
  let admitted: BatchPlan['tickets'] = new Map();
  try {
    return await inBatchTransaction(
      parts.database,
      parts.lifecycle,
      (tx) => runLocked(tx, parts, attempt, (tickets) => (admitted = tickets)),
      parts.registry.longestTimeoutMs + BATCH_DEADLINE_MARGIN_MS,
    );
  } catch (error) {
    // Rolled back: nothing of it ran, so its runs did not start.
    for (const [id, ticket] of admitted) parts.limits.rollBack(ticket, id);
    parts.limits.dropUnused(attempt.ids);
    throw error;
  }
}

async function runLocked(
  tx: RunTransaction,
  parts: BatchParts,
  attempt: BatchAttempt,
  onAdmitted: (tickets: BatchPlan['tickets']) => void,
): Promise<BatchResult> {
  const { lifecycle, registry, limits, databaseExecutor, owner, misfireGraceMs, mayClaim, fence, metrics, clock } = parts;
  const { ids, mode, threw, slots } = attempt;
  const claimable = mayClaim === undefined ? [...ids] : ids.filter((id) => mayClaim(id));
  if (claimable.length < ids.length) metrics?.fencedClaims.inc(ids.length - claimable.length);
  const leadMs = parts.lockAheadMs?.() ?? 0;
  const claimed = claimable.length === 0 ? [] : await tx.claim(claimable, attempt.now + leadMs, fence?.(claimable));
  if (claimable.length > 0 && claimed.length === 0) metrics?.emptyClaims.inc();
  // Behind by more than the lead (a backlog): the due tasks run at once, and those ahead are left
  // for their timers, so a late task never waits for a later one. Behind by less, all of them wait
  // for the latest: claiming those ahead again would cost them their head start.
  const behind = claimed.some((task) => task.runAt < attempt.now - leadMs);
  const locked = behind ? claimed.filter((task) => task.runAt <= attempt.now) : claimed;
  const later = behind ? claimed.filter((task) => task.runAt > attempt.now) : [];
  // The batch runs at the latest runAt it keeps: at once when behind.
  const now = locked.reduce((latest, task) => Math.max(latest, task.runAt), attempt.now);
  // The fleet's slots of limited types (fleet-slots.ts), each as long as the task's lease would be.
  await limits.reserve(locked, (task) => (registry.get(task.type)?.timeoutMs ?? registry.longestTimeoutMs) + LEASE_MARGIN_MS);
  const plan = planBatch(locked, {
    now,
    slots,
    misfireGraceMs,
    threw,
    handlers: registry,
    limits,
    failureOf: (task, used, error, at) => lifecycle.failureOf(task, used, error, at),
  });
  onAdmitted(plan.tickets);
  limits.dropUnused(locked.map((task) => task.id)); // reserved for a task the plan did not admit
  const { runnable, failures, ...kept } = plan;
  const result: BatchResult = { ...kept, locked, later, done: [], failures, at: now };
  // Runs ahead of `now` only what writes nothing before COMMIT: a pipelined fast try of handlers that lock ahead.
  const commitOnly =
    mode === 'fast' &&
    plan.leased.length === 0 &&
    pipelineOf(tx.conn) !== undefined &&
    [...runnable.keys()].every((handler) => handler.locksAhead === true);
  if (!commitOnly) await until(clock, now);
  if (plan.leased.length > 0) {
    const longest = Math.max(...plan.leased.map(({ handler }) => handler.timeoutMs));
    await tx.lease(
      plan.leased.map(({ task }) => task),
      owner,
      now + longest + LEASE_MARGIN_MS,
      now,
    );
  }
  if (mode === 'careful') await databaseExecutor.runCarefully(tx.conn, runnable, now, result);
  else await databaseExecutor.runFast(tx.conn, runnable, now, result);
  const results = new Map<number, string>();
  for (const { task, outcome } of result.done) {
    const answered = resultOf(outcome);
    if (answered !== null) results.set(task.id, answered);
  }
  await tx.complete(
    result.done.map(({ task }) => task),
    now,
    results,
  );
  await tx.fail(result.failures, now);
  await tx.skip(result.skipped, now);
  await tx.expire(result.expired, now);
  if (commitOnly && now > clock.now()) {
    const unpark = parts.park?.();
    try {
      await until(clock, now);
    } finally {
      unpark?.();
    }
  }
  return result;
}
