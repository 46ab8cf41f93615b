/**
 * The lifecycle: the single owner of every state change of a task. Each transition lives in a file
 * named for its group (create.ts, change.ts, run.ts, repair.ts, recur.ts, bulk.ts) and writes its
 * rows through the store. Transitions return their timer effects (effects.ts) instead of arming;
 * this class applies them, in one place, after the rows are committed, so no caller arms or disarms
 * a timer after a write.
 * See docs/architecture.md#the-lifecycle.
 */
import type { Clock } from '../time/clock.js';
import { inShards } from '../cluster/shards.js';
import type { Connection } from '../db/connection.js';
import { retrying, type RetryPolicy } from '../db/retry.js';
import { heldAt, type ClaimFence } from '../store/leases.js';
import type { TaskStore } from '../store/task-store.js';
import { isReservedKey, type CallRecord, type Failure, type Selector, type Task } from '../store/task-types.js';
import type { BackoffPolicy } from './backoff.js';
import { bulkChange, type BulkChange, type BulkCounts } from './bulk.js';
import { cancel, deleteTask, editPayload, reschedule, retry, type ChangeResult, type DeleteResult, type Placement } from './change.js';
import { create, createMany, type CreateRequest, type CreateResult } from './create.js';
import type { EffectSink, TimerEffect } from './effects.js';
import { EXPIRED_REASON, recoverExpiredLeases, recoverLeases, skipLocked, skipMisfired } from './repair.js';
import { asksReplace, replaceIfAsked } from './replace.js';
import { failureOutcome, recordRuns, runOf, type RunRecorder } from './history.js';
import type { NewRun } from '../store/run-history.js';
import { notifyFailures, type FailureNotifier } from './notify.js';
import * as run from './run.js';

export interface LifecycleOptions {
  store: TaskStore;
  clock: Clock;
  /** Backoff of a failed run. */
  retry: BackoffPolicy;
  /** Where timer effects go after COMMIT. */
  effects: EffectSink;
  /** Where each run's row goes, in the transaction of its outcome; none: no run history. */
  runs?: RunRecorder;
  /** NOTIFY_URL: a task that fails for good is told there, in the transaction of its failure. */
  notify?: FailureNotifier;
}

/** The run transitions inside one transaction (a dispatcher batch); effects are applied after COMMIT. */
export interface RunTransaction {
  readonly conn: Connection;
  /** The timers the transitions so far ask for, once COMMIT succeeded (Lifecycle.afterCommit). */
  readonly effects: readonly TimerEffect[];
  /**
   * Locks the pending, due tasks among `ids`. With `fence` (SHARDING=on), only those of the
   * shards this process still holds at the fence's epochs, as the database says at the claim.
   */
  claim(ids: number[], now: number, fence?: ClaimFence): Promise<Task[]>;
  lease(tasks: Task[], owner: string, leaseUntil: number, now: number): Promise<void>;
  /** `results`: what each task's handler answered (resultOf), by task id; kept on the task and its run. */
  complete(tasks: Task[], now: number, results?: ReadonlyMap<number, string>): Promise<void>;
  fail(failed: run.Failed[], now: number): Promise<void>;
  /** Locked tasks that waited for their type past the misfire grace and asked to be skipped. */
  skip(tasks: Task[], now: number): Promise<void>;
  /** Locked tasks past their expireAfterMs: skipped as expired. */
  expire(tasks: Task[], now: number): Promise<void>;
  /** Writes the failed runs' rows, before COMMIT. */
  finish(): Promise<void>;
}

/** A change through the API to a task punctual owns (its failure notice): refused, whatever the route. */
export class ReservedTask extends Error {
  override name = 'ReservedTask';
  constructor(readonly task: Task) {
    super(`task ${task.id} is a failure notice punctual sends (key ${JSON.stringify(task.key)}): it cannot be changed through the API`);
  }
}

/** The one check every change of a single task passes (bulk changes never pick such a task: store/sql/tasks.ts). */
function refuseReserved(task: Task): void {
  if (isReservedKey(task.key)) throw new ReservedTask(task);
}

export class Lifecycle {
  readonly #options: LifecycleOptions;

  constructor(options: LifecycleOptions) {
    this.#options = options;
  }

  /** The one place effects are applied. */
  #apply<T extends { effects: readonly TimerEffect[] }>(result: T): T {
    if (result.effects.length > 0) this.#options.effects.apply(result.effects);
    return result;
  }

  // ── the shop's requests ───────────────────────────────────────────────────────────────────

  /** `now` is the instant the request's time was read at (a delayMs counts from it). */
  async create(request: CreateRequest, now = this.#options.clock.now()): Promise<CreateResult> {
    const { store } = this.#options;
    return this.#apply(await replaceIfAsked(store, await create(store, request, now), request, now));
  }

  /** Many creates at once (a batch), each answered as `create` would; written together, or none. */
  async createMany(requests: readonly CreateRequest[], now = this.#options.clock.now()): Promise<CreateResult[]> {
    const { store } = this.#options;
    const results = await createMany(store, requests, now);
    // Replaces one after another, in the batch's order: a key given twice ends with the later content.
    for (let i = 0; i < results.length; i++) {
      const request = requests[i]!;
      // Awaited only where a replace may come of it: not a wait for each of a batch's thousand creates.
      if (asksReplace(results[i]!, request)) results[i] = await replaceIfAsked(store, results[i]!, request, now);
    }
    this.#apply({ effects: results.flatMap((result) => result.effects) });
    return results;
  }

  async cancel(task: Task): Promise<ChangeResult> {
    refuseReserved(task);
    return this.#apply(await cancel(this.#options.store, task, this.#options.clock.now()));
  }

  /** Moves a pending task; `place` reads the request against the task and the time now. */
  async reschedule(task: Task, place: (task: Task, now: number) => Placement): Promise<ChangeResult> {
    refuseReserved(task);
    const now = this.#options.clock.now();
    return this.#apply(await reschedule(this.#options.store, task, place(task, now), now));
  }

  /** Runs a failed task again at `place(task, now)`, its attempts reset. */
  async retry(task: Task, place: (task: Task, now: number) => Placement): Promise<ChangeResult> {
    refuseReserved(task);
    const now = this.#options.clock.now();
    return this.#apply(await retry(this.#options.store, task, place(task, now), now));
  }

  /** Deletes a task that is not running, with its runs (change.ts). */
  async delete(task: Task): Promise<DeleteResult> {
    refuseReserved(task);
    return this.#apply(await deleteTask(this.#options.store, task));
  }

  /** Replaces a pending task's payload (already checked against its type's schema). */
  async editPayload(task: Task, payload: unknown): Promise<ChangeResult> {
    refuseReserved(task);
    return editPayload(this.#options.store, task, payload, this.#options.clock.now());
  }

  /** Cancels, retries, deletes or moves every task `selector` picks, a chunk at a time (bulk.ts). */
  bulk(selector: Selector, change: BulkChange): Promise<BulkCounts> {
    return bulkChange(
      this.#options.store,
      selector,
      change,
      () => this.#options.clock.now(),
      (effects) => this.#apply({ effects }),
    );
  }

  // ── the scheduler's repairs ───────────────────────────────────────────────────────────────

  /** With `shards`, of those shards only (repair.ts). */
  async skipMisfired(before: number, shards?: readonly number[]): Promise<{ skipped: number }> {
    return this.#apply(await skipMisfired(this.#options.store, before, this.#options.clock.now(), shards));
  }

  /** With `shards`, of those shards only (repair.ts). */
  async recoverExpiredLeases(shards?: readonly number[]): Promise<{ recovered: number; failed: number }> {
    return this.#apply(
      await recoverExpiredLeases(this.#options.store, this.#options.clock.now(), shards, this.#options.runs, this.#options.notify),
    );
  }

  /**
   * An operator releases a stuck lease: the one lease recovery (repair.ts), for this task alone,
   * so only a lease that ran out is released (its run on record as lost, the task pending again
   * or failed on its last attempt). Answers whether it was.
   */
  async releaseLease(task: Task): Promise<{ released: boolean; failed: boolean }> {
    refuseReserved(task);
    const now = this.#options.clock.now();
    const done = this.#apply(await recoverLeases(this.#options.store, [task.id], now, this.#options.runs, this.#options.notify));
    return { released: done.recovered + done.failed === 1, failed: done.failed === 1 };
  }

  // ── runs ──────────────────────────────────────────────────────────────────────────────────

  /** Retry with backoff, or failed for good. */
  failureOf(task: Task, attemptsUsed: number, error: unknown, now: number): Failure {
    return run.failureOf(this.#options.retry, task, attemptsUsed, error, now);
  }

  /**
   * The run transitions bound to `conn`, a transaction the caller (a dispatcher batch) opened: the
   * writes happen on it, and the timer effects they ask for gather in `effects` for the caller to
   * hand to afterCommit once COMMIT succeeded; a rollback drops them with the rows. `finish`
   * writes the batch's failed runs, together, before COMMIT.
   */
  runTransitions(conn: Connection): RunTransaction {
    const { store, clock, runs: recorder, notify } = this.#options;
    const effects: TimerEffect[] = [];
    // The batch's failed runs, written together in one statement before COMMIT: on record with their outcomes.
    const runs: NewRun[] = [];
    return {
      conn,
      effects,
      claim: async (ids, now, fence) => {
        let claimable = fence === undefined ? ids : inShards(ids, await heldAt(conn, fence));
        if (fence?.unfenced !== undefined && fence.unfenced.length > 0) {
          const fenced = new Set(claimable);
          claimable = [...claimable, ...fence.unfenced.filter((id) => !fenced.has(id) && ids.includes(id))];
        }
        return claimable.length === 0 ? [] : run.claim(store, conn, claimable, now);
      },
      lease: (tasks, owner, leaseUntil, now) => run.lease(store, conn, tasks, owner, leaseUntil, now),
      complete: async (tasks, now, results) => {
        // A successful run is on record in its task's row, with no row of its own (store/run-history.ts).
        // Run ahead: it ends when it commits, at `now` or later.
        const finish = { at: Math.max(now, clock.now()), by: recorder?.process ?? null };
        effects.push(...(await run.complete(store, conn, tasks, now, results, finish)));
      },
      fail: async (failed, now) => {
        effects.push(...(await run.fail(store, conn, failed, now)));
        const final = failed.filter(({ failure }) => failure.retryAt === null);
        await notifyFailures(
          notify,
          conn,
          final.map(({ task, failure }) => ({ task, attempt: task.attempts + 1, error: failure.error })),
          now,
        );
        if (recorder === undefined) return;
        const times = { startedAt: now, finishedAt: Math.max(now, clock.now()) }; // run ahead: it ends when it commits, at `now` or later
        for (const { task, failure } of failed) runs.push(runOf(recorder, task, failureOutcome(failure), failure.error, times));
      },
      skip: async (tasks, now) => void effects.push(...(await skipLocked(store, conn, tasks, now))),
      expire: async (tasks, now) => void effects.push(...(await skipLocked(store, conn, tasks, now, EXPIRED_REASON))),
      finish: () => recordRuns(recorder, conn, runs),
    };
  }

  /** A batch's effects (runTransitions), once its COMMIT succeeded. */
  afterCommit(effects: readonly TimerEffect[]): void {
    this.#apply({ effects });
  }

  /** Completes an outside run if it is still the run this process leased (`task` as claimed); retried per `persist`. */
  async completeLeased(task: Task, owner: string, persist: RetryPolicy, call: CallRecord): Promise<run.Settled> {
    const { store, clock, runs } = this.#options;
    return this.#apply(await retrying(() => run.completeLeased(store, task, owner, call, clock.now(), runs), persist));
  }

  async failLeased(
    task: Task,
    failure: Failure,
    owner: string,
    persist: RetryPolicy,
    call: CallRecord,
    startedAt?: number,
  ): Promise<run.Settled> {
    const { store, clock, runs, notify } = this.#options;
    return this.#apply(
      await retrying(() => run.failLeased(store, task, failure, owner, call, clock.now(), runs, startedAt, notify), persist),
    );
  }

  /** Records the failure of a run (started at `startedAt`) that lost its transaction, if `task` is still pending as it was claimed. */
  async failRolledBack(task: Task, failure: Failure, persist: RetryPolicy, startedAt?: number): Promise<run.Settled> {
    const { store, clock, runs, notify } = this.#options;
    return this.#apply(await retrying(() => run.failRolledBack(store, task, failure, clock.now(), runs, startedAt, notify), persist));
  }
}
