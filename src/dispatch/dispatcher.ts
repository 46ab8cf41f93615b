/**
 * The dispatcher runs tasks whose timers fired: its queue (due-queue.ts) and two executors, at
 * most CONCURRENCY batches at a time and CONCURRENCY outside calls besides.
 *
 * A batch is one transaction of the lifecycle: it claims the due tasks among the fired ids
 * (`FOR UPDATE SKIP LOCKED`, so two processes never run one task). Database handlers run on that
 * transaction (run-inside.ts) and their tasks complete before COMMIT: a crash at any point rolls
 * all of it back and the tasks are simply pending again. Tasks of outside handlers are leased in
 * the same transaction, as many as there are free outside slots, and run after COMMIT outside any
 * transaction (run-outside.ts): one claim per run. Outside tasks beyond the free slots are not
 * leased (a lease must not tick while a task waits): they wait here, and a batch claims them
 * when a slot frees.
 *
 * Type controls (limits.ts) are asked for each locked task before it runs or is leased: a task of
 * a paused type, or over its type's concurrency or rate limit, is not claimed. It stays pending
 * with no attempt used (the transaction changes nothing of it), and waits in limits.ts, its id
 * still busy in the queue, until it may run; then it comes back here before the queue's ids. A
 * task that waited past the misfire grace and asked to be skipped is skipped (the lifecycle's
 * skip transition), as at boot. Locked tasks run in (runAt, id) order.
 *
 * Deadlocks and lock-wait timeouts are retried without using an attempt; a lost connection puts
 * the tasks back on their timers to try again shortly. Timers for retries and next occurrences
 * are the lifecycle's effects: nothing here re-arms after a run. Nothing here may throw out: the
 * process never dies on a task.
 */
import type { Logger } from 'pino';
import type { Clock } from '../time/clock.js';
import type { Database } from '../db/connection.js';
import { isConnectionError, isLockConflict, loggable, rootMessage } from '../db/errors.js';
import { growingDelay, lockConflicts, retrying, untilStopped } from '../db/retry.js';
import type { DatabaseHandler, OutsideHandler } from '../handlers/handler.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import { arm, type EffectSink } from '../lifecycle/effects.js';
import type { Lifecycle, RunTransaction } from '../lifecycle/lifecycle.js';
import { unrunnable } from '../lifecycle/run.js';
import type { Ticket, TypeLimits } from './limits.js';
import type { Task, TaskStore } from '../store/task-store.js';
import { Fifo, sleep } from '../util/async.js';
import type { DueQueue } from '../timers/due-queue.js';
import { Outcomes, type DispatchMetrics } from './outcomes.js';
import { HandlerOverran, HandlerThrew, InsideExecutor, type InsideRun } from './run-inside.js';
import { LEASE_MARGIN_MS, OutsideExecutor } from './run-outside.js';

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
  limits: TypeLimits;
  /** A task that waited for its type longer than this past its runAt follows its misfire rule. */
  misfireGraceMs: number;
  /**
   * Whether this process may claim a task now (SHARDING=on: it holds the task's shard and can
   * prove it); the others among fired ids are left alone. Undefined: every task.
   */
  mayClaim?: (id: number) => boolean;
  metrics?: DispatchMetrics;
}

/** How many times a batch is tried after a deadlock or lock-wait timeout before splitting it. */
const LOCK_RETRIES = 3;
/** When a task was locked by someone else, look at it again after this long. */
const RECHECK_MS = 1000;
/**
 * A batch's transaction may hold its connection this much longer than the slowest handler may
 * run: past that the connection stopped answering, and the batch is tried again.
 */
const BATCH_DEADLINE_MARGIN_MS = 15_000;

interface BatchResult extends InsideRun {
  locked: Task[];
  /** Outside tasks leased in this transaction, to run after COMMIT. */
  leased: { task: Task; handler: OutsideHandler }[];
  /** Outside tasks beyond the free slots: not leased, they wait for a slot. */
  deferred: Task[];
  /** Tasks their type's pause or limits hold back: not claimed, they wait in limits.ts. */
  held: Task[];
  /** Tasks that waited for their type past the misfire grace and asked to be skipped. */
  skipped: Task[];
  /** The runs admitted by the type limits, by task id. */
  tickets: Map<number, Ticket>;
}

export class Dispatcher {
  readonly #o: DispatcherOptions;
  /** Due outside tasks that found no free slot, still busy in the queue. */
  readonly #outsideWaiting = new Fifo<number>();
  /** Ids the type limits let through again (they were held back), still busy in the queue. */
  readonly #released = new Fifo<number>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  readonly #outcomes: Outcomes;
  readonly #inside: InsideExecutor;
  readonly #outsideExecutor: OutsideExecutor;
  #batches = 0;
  /** Outside slots reserved by batches or running a call. */
  #outside = 0;
  #pumpScheduled = false;
  #stopping = false;
  #troubles = 0;

  constructor(options: DispatcherOptions) {
    this.#o = options;
    this.#outcomes = new Outcomes(options.log, options.metrics);
    this.#inside = new InsideExecutor(options.database, options.log, (task, used, error, now) =>
      options.lifecycle.failureOf(task, used, error, now),
    );
    this.#outsideExecutor = new OutsideExecutor(
      options.lifecycle,
      options.clock,
      options.log,
      this.#outcomes,
      options.owner,
      this.#abort.signal,
    );
    options.queue.consume(() => this.#schedulePump());
    options.limits.consume((ids) => {
      for (const id of ids) this.#released.push(id);
      this.#schedulePump();
    });
  }

  /** Batches and outside calls running now. */
  get running(): number {
    return this.#batches + this.#outside;
  }

  /**
   * Stops taking work and waits for what runs to finish, up to `timeoutMs`; then outside
   * handlers are aborted. Queued tasks stay pending in the table for the next process.
   * Resolves true when everything finished in time.
   */
  async stop(timeoutMs: number): Promise<boolean> {
    this.#stopping = true;
    this.#o.queue.close();
    this.#o.limits.stop();
    const drained = Promise.allSettled([...this.#inFlight]).then(() => true);
    const finished = await Promise.race([drained, sleep(timeoutMs).then(() => false)]);
    if (!finished) this.#abort.abort(new Error('punctual is stopping'));
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
      this.#o.log.error({ err: loggable(error) }, 'dispatcher: unexpected error');
    });
    this.#inFlight.add(tracked);
    void tracked.finally(() => this.#inFlight.delete(tracked));
  }

  #pump(): void {
    const { concurrency, batchSize, queue } = this.#o;
    // Outside tasks waiting for a slot first: they have waited longest.
    while (!this.#stopping && this.#batches < concurrency && this.#outside < concurrency && this.#outsideWaiting.length > 0) {
      this.#startBatch(this.#outsideWaiting.take(Math.min(batchSize, concurrency - this.#outside)));
    }
    while (!this.#stopping && this.#batches < concurrency && this.#released.length > 0) {
      this.#startBatch(this.#released.take(batchSize));
    }
    while (!this.#stopping && this.#batches < concurrency && queue.length > 0) {
      this.#startBatch(queue.take(batchSize));
    }
  }

  #startBatch(ids: number[]): void {
    this.#batches++;
    // Outside slots for the tasks this batch may lease; the unused ones go back when it ends.
    const slots = Math.max(0, Math.min(this.#o.concurrency - this.#outside, ids.length));
    this.#outside += slots;
    this.#track(
      this.#runBatch(ids, slots)
        .then((used) => void (this.#outside -= slots - used))
        .finally(() => {
          this.#batches--;
          this.#pump();
        }),
    );
  }

  /** Puts tasks back on their timers after a database failure, with a growing delay. */
  #later(ids: number[], error: unknown): void {
    const delay = growingDelay(++this.#troubles);
    const level = isConnectionError(error) ? 'warn' : 'error';
    this.#o.log[level]({ err: loggable(error), tasks: ids.length, retryInMs: delay }, 'dispatcher: database failed, trying again');
    this.#o.metrics?.dispatchDbFailures.inc();
    this.#putBack(ids, this.#o.clock.now() + delay);
  }

  #putBack(ids: number[], at: number): void {
    this.#o.queue.release(ids);
    this.#o.effects.apply(ids.map((id) => arm(id, at)));
  }

  // ── batches ───────────────────────────────────────────────────────────────────────────────

  /** Runs one batch; answers how many of its `slots` it used for leased outside tasks. */
  async #runBatch(batch: number[], slots: number): Promise<number> {
    const { lifecycle, registry, log, clock } = this.#o;
    let pending = batch;
    let careful = false;
    // Errors of handlers that threw in the fast path: recorded, not run a second time.
    const threw = new Map<number, unknown>();
    while (pending.length > 0) {
      let now = clock.now();
      try {
        const result = await retrying(
          () => {
            now = clock.now();
            const tickets = new Map<number, Ticket>();
            return lifecycle
              .inTransaction(
                (tx) => this.#runLocked(tx, pending, now, careful, threw, slots, tickets),
                registry.longestTimeoutMs + BATCH_DEADLINE_MARGIN_MS,
              )
              .catch((error: unknown) => {
                // Rolled back: nothing of it ran, so its runs did not start.
                for (const ticket of tickets.values()) this.#o.limits.release(ticket, false);
                throw error;
              });
          },
          lockConflicts(LOCK_RETRIES, (error, round) =>
            log.debug({ error: rootMessage(error), tasks: pending.length, round }, 'dispatcher: lock conflict, retrying the batch'),
          ),
        );
        this.#troubles = 0;
        this.#settle(result, pending, now);
        await this.#recheckMissing(pending, result.locked, now);
        return result.leased.length;
      } catch (error) {
        if (error instanceof HandlerThrew) {
          if (error.taskId !== undefined) threw.set(error.taskId, error.error);
          careful = true;
        } else if (error instanceof HandlerOverran) {
          await this.#failOverran(error, now);
          pending = pending.filter((id) => id !== error.task.id);
        } else if (!isConnectionError(error) && pending.length > 1) {
          // A lock conflict, or a statement that failed for a reason of its rows (a trigger, a
          // constraint): one by one, so only the task it concerns waits, not every task batched with it.
          let used = 0;
          for (const id of pending) used += await this.#runBatch([id], slots - used);
          return used;
        } else if (isLockConflict(error)) {
          // Waiting for a lock someone else holds is not the task's failure: no attempt is used.
          const id = pending[0]!;
          log.warn({ taskId: id, error: rootMessage(error) }, 'task waits for a lock held elsewhere; trying again');
          this.#putBack([id], now + RECHECK_MS + Math.random() * RECHECK_MS);
          return 0;
        } else {
          this.#later(pending, error);
          return 0;
        }
      }
    }
    return 0;
  }

  /**
   * One try of a batch, inside its transaction: claim the due tasks, lease the outside ones (up to
   * `slots`), run the database ones, record the outcomes.
   */
  async #runLocked(
    tx: RunTransaction,
    batch: number[],
    now: number,
    careful: boolean,
    threw: Map<number, unknown>,
    slots: number,
    tickets: Map<number, Ticket>,
  ): Promise<BatchResult> {
    const { registry, lifecycle, owner, limits, misfireGraceMs, mayClaim } = this.#o;
    const claimable = mayClaim === undefined ? batch : batch.filter((id) => mayClaim(id));
    if (claimable.length < batch.length) this.#o.metrics?.fencedClaims.inc(batch.length - claimable.length);
    const locked = claimable.length === 0 ? [] : await tx.claim(claimable, now);
    if (claimable.length > 0 && locked.length === 0) this.#o.metrics?.emptyClaims.inc();
    const result: BatchResult = { locked, done: [], failures: [], leased: [], deferred: [], held: [], skipped: [], tickets };
    const runnable = new Map<DatabaseHandler, Task[]>();
    for (const task of [...locked].sort((a, b) => a.runAt - b.runAt || a.id - b.id)) {
      const handler = registry.get(task.type);
      const problem = registry.payloadProblem(task.type, task.payload);
      if (handler === undefined || problem !== undefined) {
        result.failures.push(unrunnable(task, handler === undefined ? `no handler for type ${JSON.stringify(task.type)}` : problem!));
        continue;
      }
      if (handler.effect === 'outside' && result.leased.length >= slots) {
        result.deferred.push(task); // no slot: it waits for one before it asks its type
        continue;
      }
      if (limits.waited(task.id) && task.misfire === 'skip' && task.runAt < now - misfireGraceMs) {
        result.skipped.push(task);
        continue;
      }
      const ticket = limits.admit(task, now);
      if (ticket === undefined) {
        result.held.push(task);
        continue;
      }
      tickets.set(task.id, ticket);
      if (handler.effect === 'outside') {
        result.leased.push({ task, handler });
      } else if (threw.has(task.id)) {
        result.failures.push({ task, failure: lifecycle.failureOf(task, task.attempts + 1, threw.get(task.id), now) });
      } else {
        runnable.set(handler, [...(runnable.get(handler) ?? []), task]);
      }
    }
    if (result.leased.length > 0) {
      const longest = Math.max(...result.leased.map(({ handler }) => handler.timeoutMs));
      await tx.lease(
        result.leased.map(({ task }) => task),
        owner,
        now + longest + LEASE_MARGIN_MS,
        now,
      );
    }
    await this.#inside.run(tx.conn, runnable, careful, now, result);
    await tx.complete(
      result.done.map(({ task }) => task),
      now,
    );
    await tx.fail(result.failures, now);
    await tx.skip(result.skipped, now);
    return result;
  }

  /** After COMMIT: report the runs, start the leased outside ones, queue the deferred ones. */
  #settle(result: BatchResult, batch: number[], now: number): void {
    const { clock, queue } = this.#o;
    // A batch's time, shared among its tasks: one task's part of it.
    const share = Math.round(((clock.now() - now) / Math.max(1, result.done.length + result.failures.length)) * 100) / 100;
    for (const { task, outcome } of result.done) this.#outcomes.done(task, now, share, outcome);
    for (const { task, failure } of result.failures) this.#outcomes.failed(task, failure, now, share);
    const { limits } = this.#o;
    const leased = new Set(result.leased.map(({ task }) => task.id));
    // The database runs are over: their slots under the type limits free up.
    for (const [id, ticket] of result.tickets) if (!leased.has(id)) limits.release(ticket);
    const kept = new Set([...leased, ...result.deferred.map((task) => task.id), ...result.held.map((task) => task.id)]);
    const done = batch.filter((id) => !kept.has(id));
    queue.release(done);
    for (const id of done) limits.waited(id); // woken, then cancelled or moved meanwhile: forgotten
    for (const task of result.deferred) this.#outsideWaiting.push(task.id);
    for (const task of result.held) limits.hold(task);
    for (const { task, handler } of result.leased) {
      const ticket = result.tickets.get(task.id)!;
      this.#track(
        this.#outsideExecutor.run(task, handler, now).finally(() => {
          limits.release(ticket);
          this.#outside--;
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
  async #recheckMissing(batch: number[], locked: Task[], now: number): Promise<void> {
    if (locked.length === batch.length) return;
    const lockedIds = new Set(locked.map((task) => task.id));
    const missing = batch.filter((id) => !lockedIds.has(id));
    const { effects, store } = this.#o;
    try {
      effects.apply((await store.pendingAmong(missing)).map((task) => arm(task.id, task.runAt > now ? task.runAt : now + RECHECK_MS)));
    } catch {
      effects.apply(missing.map((id) => arm(id, now + RECHECK_MS)));
    }
  }

  /** A handler overran and took its transaction with it: its failure is recorded on its own. */
  async #failOverran(error: HandlerOverran, now: number): Promise<void> {
    const { lifecycle, clock, log, queue } = this.#o;
    const failure = lifecycle.failureOf(error.task, error.task.attempts + 1, error, now);
    await lifecycle
      .failAlone(
        error.task,
        failure,
        untilStopped(this.#abort.signal, (cause, _round, delay) =>
          log.warn({ err: loggable(cause), retryInMs: delay }, 'dispatcher: could not record a result, trying again'),
        ),
      )
      .catch(() => undefined); // stopping with the database away: the task is pending, the next process runs it
    queue.release([error.task.id]);
    this.#outcomes.failed(error.task, failure, now, clock.now() - now);
  }
}
