/**
 * The dispatcher runs tasks whose timers fired: its queue (due-queue.ts) and two executors, at
 * most CONCURRENCY batches at a time (one more for due tasks of a priority above all of those,
 * pump-plan.ts) and CONCURRENCY outside calls besides. It pumps and settles;
 * each decision lives in a file of its own:
 *
 *   which ids go together in the next batch ..... pump-plan.ts
 *   free outside slots ......................... outside-slots.ts
 *   one try of a batch in its transaction ...... batch-try.ts (what becomes of each locked task:
 *                                                 batch-plan.ts)
 *   what kind of error stopped a batch ......... error-kind.ts
 *   what to do with a batch that failed ........ split-policy.ts
 *   what a committed batch leaves to do ........ settlement.ts
 *   pauses and run limits per type ............. limits.ts
 *
 * A batch is one transaction of the lifecycle: it claims the due tasks among the fired ids
 * (`FOR UPDATE SKIP LOCKED`, so two processes never run one task). Database handlers run on that
 * transaction (run-database.ts) and their tasks complete before COMMIT: a crash at any point rolls
 * all of it back and the tasks are simply pending again. Tasks of outside handlers are leased in
 * the same transaction, as many as there are free outside slots, and run after COMMIT outside any
 * transaction (run-outside.ts): one claim per run. Outside tasks beyond the free slots are not
 * leased (a lease must not tick while a task waits): they wait here, and a batch claims them
 * when a slot frees.
 *
 * A task its type's pause or limits hold back is not claimed: it stays pending with no attempt
 * used, and waits in limits.ts, its id still busy in the queue, until it may run; then it comes
 * back here before the queue's ids. One its type's waiting room has no place for is left to the
 * table (its id released), and the scheduler's reconcile arms it again.
 *
 * Timers for retries and next occurrences are the lifecycle's effects: nothing here re-arms after
 * a run. Nothing here may throw out: the process never dies on a task.
 */
import type { Logger } from 'pino';
import type { Clock } from '../time/clock.js';
import type { Database } from '../db/connection.js';
import { isConnectionError, loggable, rootMessage } from '../db/errors.js';
import { growingDelay, lockConflicts, retrying, untilStopped } from '../db/retry.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import { arm, type EffectSink } from '../lifecycle/effects.js';
import type { Lifecycle } from '../lifecycle/lifecycle.js';
import { RepeatedWarnings } from '../observability/repeated-warnings.js';
import type { Tracing } from '../observability/tracing.js';
import type { ClaimFence } from '../store/leases.js';
import type { TaskStore } from '../store/task-store.js';
import type { Task } from '../store/task-types.js';
import type { DueQueue } from '../timers/due-queue.js';
import { Fifo, sleep } from '../util/async.js';
import { tryBatch, type BatchParts, type BatchResult, type RunMode } from './batch-try.js';
import { batchErrorOf, type HandlerOverran } from './error-kind.js';
import type { TypeAdmission } from './limits.js';
import { Outcomes, type DispatchMetrics } from './outcomes.js';
import { OutsideSlots } from './outside-slots.js';
import { settlementOf } from './settlement.js';
import { nextBatch, type Line } from './pump-plan.js';
import { DatabaseExecutor } from './run-database.js';
import { OutsideExecutor, RECORD_FAILED } from './run-outside.js';
import { nextStep } from './split-policy.js';

/** The warning of a batch the database failed (summarised: repeated-warnings.ts). */
const BATCH_FAILED = 'dispatcher: database failed, trying again';

export interface DispatcherOptions {
  database: Database;
  store: TaskStore;
  lifecycle: Lifecycle;
  registry: HandlerRegistry;
  /** Ids whose timers fired. */
  queue: DueQueue;
  /** Puts a task back on a timer (after a database failure or a lock held elsewhere). */
  effects: EffectSink;
  clock: Clock;
  log: Logger;
  concurrency: number;
  batchSize: number;
  /** This process's name in lease_owner. */
  owner: string;
  /** Pauses and run limits per type. */
  limits: TypeAdmission;
  /** A task that waited for its type longer than this past its runAt follows its misfire rule. */
  misfireGraceMs: number;
  /**
   * Whether this process may claim a task now (SHARDING=on: it holds the task's shard and can
   * prove it); the others among fired ids are left alone. Undefined: every task.
   */
  mayClaim?: (id: number) => boolean;
  /** SHARDING=on: the shards (at their epochs) a claim of these ids is decided under; the claim holds only while they do. */
  fence?: (ids: readonly number[]) => ClaimFence;
  /** SHARDING=on: tasks created here in shards others own, claimed here too (timers/created-here.ts). */
  createdHere?: (id: number) => boolean;
  metrics?: DispatchMetrics;
  /** How long before its runAt a task may be claimed (time/lock-ahead.ts); none: at its runAt. */
  lockAheadMs?: () => number;
  /** Due tasks of worker types, after COMMIT: told to the waiting pull workers (pull-hub.ts). */
  pulled?: (tasks: readonly Task[]) => void;
  /** Runs' spans (observability/tracing.ts). */
  tracing?: Tracing;
}

/** How many times a batch is tried after a deadlock or lock-wait timeout before splitting it. */
const LOCK_RETRIES = 3;
/** When a task was locked by someone else, look at it again after this long. */
const RECHECK_MS = 1000;

export class Dispatcher {
  readonly #options: DispatcherOptions;
  readonly #parts: BatchParts;
  /** The three lines of ids waiting for a batch, still busy in the queue (pump-plan.ts). */
  readonly #lines: Record<Line, { readonly length: number; take(count: number): number[] }>;
  /** Due outside tasks that found no free slot. */
  readonly #outsideWaiting = new Fifo<number>();
  /** Ids the type limits let through again (they were held back). */
  readonly #released = new Fifo<number>();
  readonly #outsideSlots: OutsideSlots;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  readonly #outcomes: Outcomes;
  readonly #outsideExecutor: OutsideExecutor;
  #batches = 0;
  /** Batches waiting only to commit at their runAt (batch-try.ts): not counted in #batches, at most CONCURRENCY. */
  #parked = 0;
  /** The highest priority of each batch in flight (+Infinity for the other lines' batches: never overtaken). */
  readonly #flying: number[] = [];
  /** An overtaking batch is in flight (pump-plan.ts): one at a time. */
  #overtaking = false;
  #pumpScheduled = false;
  #stopping = false;
  #troubles = 0;
  /** The warnings every failed batch and record retry gives: one line per interval in an outage. */
  readonly #warnings: RepeatedWarnings;

  constructor(options: DispatcherOptions) {
    this.#options = options;
    this.#warnings = new RepeatedWarnings(options.log);
    this.#outcomes = new Outcomes(options.log, options.metrics, options.createdHere, options.tracing);
    this.#outsideSlots = new OutsideSlots(options.concurrency);
    this.#lines = { 'outside-waiting': this.#outsideWaiting, released: this.#released, due: options.queue };
    this.#parts = {
      database: options.database,
      lifecycle: options.lifecycle,
      registry: options.registry,
      limits: options.limits,
      databaseExecutor: new DatabaseExecutor(options.database, options.log, (task, used, error, now) =>
        options.lifecycle.failureOf(task, used, error, now),
      ),
      owner: options.owner,
      misfireGraceMs: options.misfireGraceMs,
      mayClaim: options.mayClaim,
      fence: options.fence,
      metrics: options.metrics,
      clock: options.clock,
      lockAheadMs: options.lockAheadMs,
      park: () => this.#park(),
    };
    this.#outsideExecutor = new OutsideExecutor(
      options.lifecycle,
      options.clock,
      options.log,
      this.#warnings,
      this.#outcomes,
      options.owner,
      this.#abort.signal,
      options.tracing,
    );
    options.queue.consume(() => this.#schedulePump());
    options.limits.consume((ids) => {
      for (const id of ids) this.#released.push(id);
      this.#schedulePump();
    });
  }

  /** Nothing runs and nothing waits to be pumped: what was due has settled (the test clock waits for it). */
  get idle(): boolean {
    return this.running === 0 && this.#inFlight.size === 0 && this.#released.length === 0 && !this.#pumpScheduled;
  }

  /** Batches and outside calls running now. */
  get running(): number {
    return this.#batches + this.#parked + this.#outsideSlots.busy;
  }

  /**
   * Stops taking work and waits for what runs to finish, up to `timeoutMs`; then outside
   * handlers are aborted. Queued tasks stay pending in the table for the next process.
   * Resolves true when everything finished in time.
   */
  async stop(timeoutMs: number): Promise<boolean> {
    this.#stopping = true;
    this.#options.queue.close();
    this.#options.limits.stop();
    const drained = Promise.allSettled([...this.#inFlight]).then(() => true);
    const finished = await Promise.race([drained, sleep(timeoutMs).then(() => false)]);
    if (!finished) this.#abort.abort(new Error('punctual is stopping'));
    this.#warnings.flush();
    return finished;
  }

  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    // Timers that fire in the same loop turn end up in one batch.
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #track(work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => {
      this.#options.log.error({ err: loggable(error) }, 'dispatcher: unexpected error');
    });
    this.#inFlight.add(tracked);
    void tracked.finally(() => this.#inFlight.delete(tracked));
  }

  #pump(): void {
    const { concurrency, batchSize, queue } = this.#options;
    const lines = this.#lines;
    while (!this.#stopping) {
      // Every slot busy: the priority a due task must be above to overtake the batches in flight.
      const floor = this.#batches >= concurrency && !this.#overtaking ? Math.max(...this.#flying) : undefined;
      const next = nextBatch({
        concurrency,
        batchSize,
        batches: this.#batches,
        outsideBusy: this.#outsideSlots.busy,
        waiting: { 'outside-waiting': lines['outside-waiting'].length, released: lines.released.length, due: lines.due.length },
        overtaking: floor === undefined ? 0 : queue.waitingAbove(floor),
      });
      if (next === undefined) return;
      const top = next.line === 'due' ? (queue.topPriority ?? 0) : Number.POSITIVE_INFINITY;
      const ids = next.overtakes === true ? queue.take(next.size, floor) : lines[next.line].take(next.size);
      this.#startBatch(ids, top, next.overtakes === true);
    }
  }

  #startBatch(ids: number[], top: number, overtakes: boolean): void {
    this.#batches++;
    this.#flying.push(top);
    if (overtakes) this.#overtaking = true;
    // Outside slots for the tasks this batch may lease; the unused ones go back when it ends.
    const slots = this.#outsideSlots.reserve(ids.length);
    this.#track(
      this.#runBatch(ids, slots)
        .then((used) => this.#outsideSlots.giveBack(slots - used))
        .finally(() => {
          this.#batches--;
          this.#flying.splice(this.#flying.indexOf(top), 1);
          if (overtakes) this.#overtaking = false;
          this.#pump();
        }),
    );
  }

  /**
   * A batch that waits only to commit gives its place back while it waits: its connection is all
   * it holds. At most CONCURRENCY do at once, so batches hold at most twice CONCURRENCY connections.
   */
  #park(): (() => void) | undefined {
    if (this.#parked >= this.#options.concurrency) return undefined;
    this.#parked++;
    this.#batches--;
    this.#pump();
    return () => {
      this.#parked--;
      this.#batches++;
    };
  }

  /** Puts tasks back on their timers after a database failure, with a growing delay. */
  #later(ids: number[], error: unknown): void {
    const { metrics, clock } = this.#options;
    const delay = growingDelay(++this.#troubles);
    const level = isConnectionError(error) ? 'warn' : 'error';
    this.#warnings.warn(BATCH_FAILED, { err: loggable(error), tasks: ids.length, retryInMs: delay }, BATCH_FAILED, level);
    metrics?.dispatchDbFailures.inc();
    this.#putBack(ids, clock.now() + delay);
  }

  #putBack(ids: number[], at: number): void {
    this.#options.queue.release(ids);
    // Put back with no type: a worker type's task rarely gets here (it has no timer, arming.ts); one that does comes back and is handed on.
    this.#options.effects.apply(ids.map((id) => arm(id, at, undefined, undefined)));
  }

  // ── batches ───────────────────────────────────────────────────────────────────────────────

  /** Runs one batch; answers how many of its `slots` it used for leased outside tasks. */
  async #runBatch(batch: number[], slots: number): Promise<number> {
    const { log, clock } = this.#options;
    let pending = batch;
    let mode: RunMode = 'fast';
    // Errors of handlers that threw in the fast path: recorded, not run a second time.
    const threw = new Map<number, unknown>();
    while (pending.length > 0) {
      let now = clock.now();
      try {
        const result = await retrying(
          () => {
            now = clock.now();
            return tryBatch(this.#parts, { ids: pending, now, mode, threw, slots });
          },
          lockConflicts(LOCK_RETRIES, (error, round) =>
            log.debug(
              { error: rootMessage(error), tasks: pending.length, round },
              'dispatcher: lock conflict or connection lost before COMMIT, retrying the batch',
            ),
          ),
        );
        this.#troubles = 0;
        this.#settle(result, pending, result.at);
        await this.#recheckMissing(pending, result, result.at);
        return result.leased.length;
      } catch (error) {
        const next = nextStep(batchErrorOf(error, mode), pending.length);
        switch (next.step) {
          case 'rerun-carefully':
            if (next.threw !== undefined) threw.set(next.threw.taskId, next.threw.error);
            mode = 'careful';
            break;
          case 'fail-overran':
            await this.#failOverran(next.overran, now);
            pending = pending.filter((id) => id !== next.overran.task.id);
            break;
          case 'split': {
            let used = 0;
            for (const id of pending) used += await this.#runBatch([id], slots - used);
            return used;
          }
          case 'recheck': {
            const id = pending[0]!;
            log.warn({ taskId: id, error: rootMessage(error) }, 'task waits for a lock held elsewhere; trying again');
            this.#putBack([id], now + RECHECK_MS + Math.random() * RECHECK_MS);
            return 0;
          }
          case 'back-off':
            this.#later(pending, error);
            return 0;
        }
      }
    }
    return 0;
  }

  /** After COMMIT: report the runs, start the leased outside ones, queue the deferred and held ones. */
  #settle(result: BatchResult, batch: number[], now: number): void {
    const { clock, queue, limits } = this.#options;
    const { finished, over, shareMs } = settlementOf(result, batch, clock.now() - now);
    for (const { task, outcome } of result.done) this.#outcomes.done(task, now, shareMs, outcome);
    for (const { task, failure } of result.failures) this.#outcomes.failed(task, failure, now, shareMs);
    for (const task of result.expired) this.#outcomes.expired(task, now);
    for (const ticket of over) limits.release(ticket);
    queue.release(finished);
    for (const id of finished) limits.waited(id); // woken, then cancelled or moved meanwhile: forgotten
    limits.returned(finished); // a woken task another process ran meanwhile: its place goes to the next
    // Locked ahead beside due ones, left pending: on their timers again (released first, so the timer's push is taken).
    this.#options.effects.apply(result.later.map((task) => arm(task.id, task.runAt, task.priority, task.type)));
    for (const task of result.deferred) this.#outsideWaiting.push(task.id);
    if (result.pulled.length > 0) this.#options.pulled?.(result.pulled);
    for (const task of result.held) {
      // No place in its type's waiting room: left to the table, where the reconcile finds it again.
      if (!limits.hold(task)) queue.release([task.id]);
    }
    for (const { task, handler } of result.leased) {
      const ticket = result.tickets.get(task.id)!;
      this.#track(
        this.#outsideExecutor.run(task, handler, now).finally(() => {
          limits.release(ticket);
          this.#outsideSlots.giveBack(1);
          queue.release([task.id]);
          this.#pump();
        }),
      );
    }
  }

  /**
   * Fired ids that were not locked: done or cancelled (drop them), moved to a later time by
   * someone else (arm the new time), or held by another transaction (look again shortly).
   */
  async #recheckMissing(batch: number[], result: BatchResult, now: number): Promise<void> {
    if (result.locked.length + result.later.length === batch.length) return;
    const lockedIds = new Set([...result.locked, ...result.later].map((task) => task.id));
    const missing = batch.filter((id) => !lockedIds.has(id));
    const { effects, store } = this.#options;
    try {
      effects.apply(
        (await store.reads.pendingAmong(missing)).map((task) =>
          arm(task.id, task.runAt > now ? task.runAt : now + RECHECK_MS, task.priority, undefined),
        ),
      );
    } catch {
      effects.apply(missing.map((id) => arm(id, now + RECHECK_MS, undefined, undefined)));
    }
  }

  /** A handler overran and took its transaction with it: its failure is recorded on its own. */
  async #failOverran(error: HandlerOverran, now: number): Promise<void> {
    const { lifecycle, clock, queue } = this.#options;
    const failure = lifecycle.failureOf(error.task, error.task.attempts + 1, error, now);
    await lifecycle
      .failRolledBack(
        error.task,
        failure,
        untilStopped(this.#abort.signal, (cause, _round, delay) =>
          this.#warnings.warn(RECORD_FAILED, { err: loggable(cause), retryInMs: delay }, RECORD_FAILED),
        ),
        now,
      )
      .catch(() => undefined); // stopping with the database away: the task is pending, the next process runs it
    queue.release([error.task.id]);
    this.#outcomes.failed(error.task, failure, now, clock.now() - now);
  }
}
