/**
 * The dispatcher runs tasks whose timers fired: at most CONCURRENCY batches at a time, and
 * CONCURRENCY outside calls besides.
 *
 * A batch is one transaction: it locks the due tasks among the fired ids
 * (`FOR UPDATE SKIP LOCKED`, so two processes never run one task), runs every database handler
 * on that transaction and marks its tasks done before COMMIT. A crash at any point rolls all of
 * it back and the tasks are simply pending again. The fast path hands each type's tasks to its
 * handler in one call, without savepoints; when a handler throws, the batch is rolled back and run
 * again with a savepoint per task, so only the faulty one fails.
 *
 * Tasks of an outside handler (webhook) found in a batch wait for an outside slot; then a short
 * transaction claims them with a lease (status running, lease_until), the handler runs outside any
 * transaction, and the completion is written after. A process that dies mid-call leaves the lease
 * to run out, and the task runs again.
 *
 * Deadlocks and lock-wait timeouts are retried without using an attempt; a lost connection puts
 * the tasks back on their timers to try again shortly. Nothing here may throw out: the process
 * never dies on a task.
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Connection, Database } from '../db/connection.js';
import { isConnectionError, isLockConflict, loggable, rootMessage } from '../db/errors.js';
import { type DatabaseHandler, type OutsideHandler, PermanentError } from '../handlers/handler.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import type { Metrics } from '../metrics.js';
import type { Failure, Task, TaskStore, TimerEntry } from '../store/task-store.js';
import { Fifo, sleep, TimeoutError, withTimeout } from '../util/async.js';
import { retryAt, type RetryPolicy } from './retry.js';

export interface DispatcherOptions {
  database: Database;
  store: TaskStore;
  registry: HandlerRegistry;
  clock: Clock;
  log: Logger;
  concurrency: number;
  batchSize: number;
  retry: RetryPolicy;
  /** This process's name in lease_owner. */
  owner: string;
  metrics?: Metrics;
  /** Puts a task back on a timer in this process. */
  arm: (id: number, at: number) => void;
}

/** How many times a batch is retried after a deadlock or lock-wait timeout before splitting it. */
const LOCK_RETRIES = 3;
/** When a task was locked by someone else, look at it again after this long. */
const RECHECK_MS = 1000;
/** The delay before trying again after the database failed, growing to the cap. */
const DB_RETRY_MS = [100, 250, 500, 1000];
/** A lease outlives the handler's timeout by this much, so a live process never loses one. */
const LEASE_MARGIN_MS = 30_000;
/**
 * A batch's transaction may hold its connection this much longer than the slowest handler may
 * run: past that the connection stopped answering, and the batch is tried again.
 */
const BATCH_DEADLINE_MARGIN_MS = 15_000;

/** A handler threw in the fast path: roll back, and run the batch again with savepoints. */
class HandlerThrew extends Error {
  /** `taskId` is undefined when a whole-batch call threw. */
  constructor(
    readonly taskId: number | undefined,
    readonly error: unknown,
  ) {
    super('a handler threw');
  }
}

/** A handler overran its time; its connection was killed. */
class HandlerOverran extends Error {
  constructor(
    readonly task: Task,
    timeoutMs: number,
  ) {
    super(`handler timed out after ${timeoutMs} ms`);
  }
}

interface BatchResult {
  locked: Task[];
  done: { task: Task; outcome: string }[];
  failures: { task: Task; failure: Failure }[];
  /** Due tasks of outside handlers: not run here, they wait for an outside slot. */
  outside: Task[];
  /** Next occurrences of recurring tasks that finished, to arm after COMMIT. */
  next: TimerEntry[];
}

export class Dispatcher {
  readonly #o: DispatcherOptions;
  /** Ids whose timers fired. */
  readonly #due = new Fifo<number>();
  /** Due tasks of outside handlers, waiting for a slot. */
  readonly #outsideWaiting = new Fifo<number>();
  /** Ids queued or running here: a timer for them is not armed again meanwhile. */
  readonly #busy = new Set<number>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  #batches = 0;
  /** Outside tasks being claimed or run. */
  #outside = 0;
  #pumpScheduled = false;
  #stopping = false;
  #troubles = 0;

  constructor(options: DispatcherOptions) {
    this.#o = options;
  }

  /** A task's timer fired. */
  enqueue(id: number): void {
    if (this.#stopping || this.#busy.has(id)) return;
    this.#busy.add(id);
    this.#due.push(id);
    this.#schedulePump();
  }

  isBusy(id: number): boolean {
    return this.#busy.has(id);
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
    const { concurrency, batchSize } = this.#o;
    while (!this.#stopping && this.#batches < concurrency && this.#due.length > 0) {
      this.#batches++;
      this.#track(
        this.#runBatch(this.#due.take(batchSize)).finally(() => {
          this.#batches--;
          this.#pump();
        }),
      );
    }
    while (!this.#stopping && this.#outside < concurrency && this.#outsideWaiting.length > 0) {
      const ids = this.#outsideWaiting.take(Math.min(batchSize, concurrency - this.#outside));
      this.#outside += ids.length;
      this.#track(this.#claimOutside(ids));
    }
  }

  #release(ids: Iterable<number>): void {
    for (const id of ids) this.#busy.delete(id);
  }

  /** Puts tasks back on their timers after a database failure, with a growing delay. */
  #later(ids: number[], error: unknown): void {
    const delay = DB_RETRY_MS[Math.min(this.#troubles, DB_RETRY_MS.length - 1)] ?? 1000;
    this.#troubles++;
    const level = isConnectionError(error) ? 'warn' : 'error';
    this.#o.log[level]({ err: loggable(error), tasks: ids.length, retryInMs: delay }, 'dispatcher: database failed, trying again');
    this.#release(ids);
    const at = this.#o.clock.now() + delay;
    for (const id of ids) this.#o.arm(id, at);
  }

  // ── batches ───────────────────────────────────────────────────────────────────────────────

  async #runBatch(batch: number[]): Promise<void> {
    let pending = batch;
    let careful = false;
    let lockRound = 0;
    // Errors of handlers that threw in the fast path: recorded, not run a second time.
    const threw = new Map<number, unknown>();
    while (pending.length > 0) {
      const now = this.#o.clock.now();
      try {
        const result = await this.#o.database.transaction(
          (_tx, conn) => this.#runLocked(conn, pending, now, careful, threw),
          this.#o.registry.longestTimeoutMs + BATCH_DEADLINE_MARGIN_MS,
        );
        this.#troubles = 0;
        this.#settle(result, pending, now);
        await this.#recheckMissing(pending, result.locked, now);
        return;
      } catch (error) {
        if (error instanceof HandlerThrew) {
          if (error.taskId !== undefined) threw.set(error.taskId, error.error);
          careful = true;
        } else if (error instanceof HandlerOverran) {
          await this.#failOverran(error, now);
          pending = pending.filter((id) => id !== error.task.id);
        } else if (isLockConflict(error) && ++lockRound < LOCK_RETRIES) {
          this.#o.log.debug(
            { error: rootMessage(error), tasks: pending.length, round: lockRound },
            'dispatcher: lock conflict, retrying the batch',
          );
          await sleep(20 * lockRound + Math.random() * 50);
        } else if (isLockConflict(error) && pending.length > 1) {
          // Run them one by one, so one contended task cannot hold back the others.
          for (const id of pending) await this.#runBatch([id]);
          return;
        } else if (isLockConflict(error)) {
          // Waiting for a lock someone else holds is not the task's failure: no attempt is used.
          const id = pending[0]!;
          this.#o.log.warn({ taskId: id, error: rootMessage(error) }, 'task waits for a lock held elsewhere; trying again');
          this.#release([id]);
          this.#o.arm(id, now + RECHECK_MS + Math.random() * RECHECK_MS);
          return;
        } else {
          this.#later(pending, error);
          return;
        }
      }
    }
  }

  /**
   * One try of a batch, inside its transaction: lock the due tasks, run them, record the
   * outcomes. The fast path hands each type's tasks to its handler in one call (runBatch) or one
   * by one without savepoints; the careful path gives every task a savepoint, so a failing one is
   * rolled back alone.
   */
  async #runLocked(conn: Connection, batch: number[], now: number, careful: boolean, threw: Map<number, unknown>): Promise<BatchResult> {
    const { store, registry } = this.#o;
    const locked = await store.lockDue(conn, batch, now);
    const result: BatchResult = { locked, done: [], failures: [], outside: [], next: [] };
    const runnable = new Map<DatabaseHandler, Task[]>();
    for (const task of locked) {
      const handler = registry.get(task.type);
      const problem = registry.payloadProblem(task.type, task.payload);
      if (handler === undefined || problem !== undefined) {
        const error = handler === undefined ? `no handler for type ${JSON.stringify(task.type)}` : problem!;
        result.failures.push({ task, failure: { id: task.id, error, retryAt: null } });
      } else if (handler.effect === 'outside') {
        result.outside.push(task);
      } else if (threw.has(task.id)) {
        result.failures.push({ task, failure: this.#failure(task, task.attempts + 1, threw.get(task.id), now) });
      } else {
        runnable.set(handler, [...(runnable.get(handler) ?? []), task]);
      }
    }
    // Handlers in a fixed order (by type), so two batches take their locks in the same order.
    const groups = [...runnable].sort(([a], [b]) => a.type.localeCompare(b.type));
    for (const [handler, tasks] of groups) {
      if (careful) {
        for (const task of tasks) await this.#runWithSavepoint(conn, handler, task, now, result);
      } else {
        await this.#runFast(conn, handler, tasks, now, result);
      }
    }
    await store.markDone(
      conn,
      result.done.map(({ task }) => task.id),
      now,
    );
    for (const { failure } of result.failures) await store.recordFailure(conn, failure, true, now);
    // A recurring task that finished (done, or failed for good) schedules its next occurrence here,
    // in the same transaction: the series neither stops nor doubles.
    const finished = [...result.done, ...result.failures.filter(({ failure }) => failure.retryAt === null)].map(({ task }) => task);
    result.next = await store.insertNextOccurrences(conn, finished, now);
    return result;
  }

  /** Runs `handler` with its time limit; an overrun kills the connection and its transaction. */
  #limited<T>(conn: Connection, handler: DatabaseHandler, work: Promise<T>): Promise<T> {
    return withTimeout(work, handler.timeoutMs, () => this.#o.database.kill(conn));
  }

  async #runFast(conn: Connection, handler: DatabaseHandler, tasks: Task[], now: number, result: BatchResult): Promise<void> {
    const { log, database } = this.#o;
    const tx = database.drizzleOf(conn);
    if (handler.runBatch !== undefined) {
      let outcomes: (string | void)[];
      try {
        const items = tasks.map((task) => ({ task, payload: task.payload }));
        outcomes = await this.#limited(conn, handler, handler.runBatch({ tx, conn, tasks: items, log, now }));
      } catch (error) {
        if (isLockConflict(error) || isConnectionError(error)) throw error;
        throw new HandlerThrew(undefined, error); // which task is unknown: the careful path finds out
      }
      tasks.forEach((task, i) => result.done.push({ task, outcome: outcomes[i] || 'done' }));
      return;
    }
    for (const task of tasks) {
      try {
        const outcome = await this.#limited(conn, handler, handler.run({ tx, conn, task, payload: task.payload, log, now }));
        result.done.push({ task, outcome: outcome || 'done' });
      } catch (error) {
        if (error instanceof TimeoutError) throw new HandlerOverran(task, handler.timeoutMs);
        if (isLockConflict(error) || isConnectionError(error)) throw error;
        throw new HandlerThrew(task.id, error);
      }
    }
  }

  async #runWithSavepoint(conn: Connection, handler: DatabaseHandler, task: Task, now: number, result: BatchResult): Promise<void> {
    const tx = this.#o.database.drizzleOf(conn);
    await conn.query('SAVEPOINT task');
    try {
      const outcome = await this.#limited(conn, handler, handler.run({ tx, conn, task, payload: task.payload, log: this.#o.log, now }));
      await conn.query('RELEASE SAVEPOINT task');
      result.done.push({ task, outcome: outcome || 'done' });
    } catch (error) {
      if (error instanceof TimeoutError) throw new HandlerOverran(task, handler.timeoutMs);
      if (isLockConflict(error) || isConnectionError(error)) throw error;
      await conn.query('ROLLBACK TO SAVEPOINT task');
      result.failures.push({ task, failure: this.#failure(task, task.attempts + 1, error, now) });
    }
  }

  #failure(task: Task, attemptsUsed: number, error: unknown, now: number): Failure {
    const permanent = error instanceof PermanentError;
    return {
      id: task.id,
      error: rootMessage(error),
      retryAt: permanent ? null : retryAt(this.#o.retry, attemptsUsed, task.maxAttempts, now),
    };
  }

  /** After COMMIT: log and count the runs, arm the retries, queue the outside tasks. */
  #settle(result: BatchResult, batch: number[], now: number): void {
    const { log, arm, metrics, clock } = this.#o;
    // A batch's time, shared among its tasks: one task's part of it.
    const share = Math.round(((clock.now() - now) / Math.max(1, result.done.length + result.failures.length)) * 100) / 100;
    for (const { task, outcome } of result.done) {
      log.info({ taskId: task.id, type: task.type, key: task.key, lateMs: now - task.runAt, durationMs: share, outcome }, 'task done');
      metrics?.recordRun(task.type, 'done', task.runAt, now, share);
    }
    for (const { task, failure } of result.failures) this.#logFailure(task, failure, now, share);
    const waiting = new Set(result.outside.map((task) => task.id));
    this.#release(batch.filter((id) => !waiting.has(id)));
    for (const { task, failure } of result.failures) {
      if (failure.retryAt !== null) arm(task.id, failure.retryAt);
    }
    for (const next of result.next) arm(next.id, next.runAt);
    for (const task of result.outside) this.#outsideWaiting.push(task.id);
    if (result.outside.length > 0) this.#schedulePump();
  }

  #logFailure(task: Task, failure: Failure, startedAt: number, durationMs: number): void {
    this.#o.log.warn(
      {
        taskId: task.id,
        type: task.type,
        key: task.key,
        lateMs: startedAt - task.runAt,
        error: failure.error,
        retryAt: failure.retryAt === null ? null : new Date(failure.retryAt).toISOString(),
      },
      failure.retryAt === null ? 'task failed' : 'task will be retried',
    );
    this.#o.metrics?.recordRun(task.type, failure.retryAt === null ? 'failed' : 'retry', task.runAt, startedAt, durationMs);
  }

  /**
   * Fired ids that were not locked: done or cancelled (drop them), moved to a later time by
   * someone else (arm the new time), or held by another transaction (look again shortly).
   */
  async #recheckMissing(batch: number[], locked: Task[], now: number): Promise<void> {
    if (locked.length === batch.length) return;
    const lockedIds = new Set(locked.map((task) => task.id));
    const missing = batch.filter((id) => !lockedIds.has(id));
    try {
      for (const task of await this.#o.store.pendingAmong(missing)) {
        this.#o.arm(task.id, task.runAt > now ? task.runAt : now + RECHECK_MS);
      }
    } catch {
      for (const id of missing) this.#o.arm(id, now + RECHECK_MS);
    }
  }

  async #failOverran(error: HandlerOverran, now: number): Promise<void> {
    const failure = this.#failure(error.task, error.task.attempts + 1, error, now);
    const settled = await this.#persist(() => this.#o.store.failAlone(error.task, failure, this.#o.clock.now()));
    this.#logFailure(error.task, failure, now, this.#o.clock.now() - now);
    this.#release([error.task.id]);
    if (failure.retryAt !== null) this.#o.arm(error.task.id, failure.retryAt);
    for (const next of settled.next) this.#o.arm(next.id, next.runAt);
  }

  /**
   * Writes a completion or a failure, retrying while the database is away: the work is done and
   * only its record is missing. Gives up when stopping; a lease then runs out and the task is
   * run again.
   */
  async #persist<T>(write: () => Promise<T>): Promise<T> {
    for (let round = 0; ; round++) {
      try {
        return await write();
      } catch (error) {
        if (this.#abort.signal.aborted) throw error;
        const delay = DB_RETRY_MS[Math.min(round, DB_RETRY_MS.length - 1)] ?? 1000;
        this.#o.log.warn({ err: loggable(error), retryInMs: delay }, 'dispatcher: could not record a result, trying again');
        await sleep(delay);
      }
    }
  }

  // ── outside handlers ──────────────────────────────────────────────────────────────────────

  /** Claims due outside tasks with a lease, then runs each; `ids.length` slots are reserved. */
  async #claimOutside(ids: number[]): Promise<void> {
    const { store, registry, database, owner, clock } = this.#o;
    const now = clock.now();
    let claimed: { task: Task; handler: OutsideHandler }[] = [];
    let locked: Task[];
    try {
      locked = await database.transaction(async (_tx, conn) => {
        const rows = await store.lockDue(conn, ids, now);
        claimed = [];
        for (const task of rows) {
          const handler = registry.get(task.type);
          if (handler?.effect === 'outside') claimed.push({ task, handler });
        }
        const longest = Math.max(0, ...claimed.map(({ handler }) => handler.timeoutMs));
        await store.markRunning(
          conn,
          claimed.map(({ task }) => task.id),
          owner,
          now + longest + LEASE_MARGIN_MS,
          now,
        );
        return rows;
      });
      this.#troubles = 0;
    } catch (error) {
      this.#outside -= ids.length;
      this.#later(ids, error);
      return;
    }
    const claimedIds = new Set(claimed.map(({ task }) => task.id));
    const unclaimed = ids.filter((id) => !claimedIds.has(id));
    this.#outside -= unclaimed.length;
    this.#release(unclaimed);
    await this.#recheckMissing(ids, locked, now);
    for (const { task, handler } of claimed) {
      this.#track(
        this.#runOutside(task, handler, now).finally(() => {
          this.#outside--;
          this.#release([task.id]);
          this.#pump();
        }),
      );
    }
  }

  async #runOutside(task: Task, handler: OutsideHandler, claimedAt: number): Promise<void> {
    const { store, owner, clock, log, arm } = this.#o;
    const attempt = task.attempts + 1;
    const started = clock.now();
    const signal = AbortSignal.any([AbortSignal.timeout(handler.timeoutMs), this.#abort.signal]);
    let outcome: string | void = undefined;
    let failure: Failure | undefined;
    try {
      outcome = await withTimeout(
        handler.run({ task: { ...task, attempts: attempt }, payload: task.payload, log, now: started, signal, attempt }),
        handler.timeoutMs,
      );
    } catch (error) {
      failure = this.#failure(task, attempt, error, clock.now());
    }
    try {
      if (failure === undefined) {
        const { recorded, next } = await this.#persist(() => store.completeLeased(task, owner, clock.now()));
        for (const occurrence of next) arm(occurrence.id, occurrence.runAt);
        if (!recorded) log.warn({ taskId: task.id, type: task.type, key: task.key }, 'task done, but its lease was lost meanwhile');
        log.info(
          {
            taskId: task.id,
            type: task.type,
            key: task.key,
            lateMs: claimedAt - task.runAt,
            durationMs: clock.now() - started,
            outcome: outcome || 'done',
          },
          'task done',
        );
        this.#o.metrics?.recordRun(task.type, 'done', task.runAt, claimedAt, clock.now() - started);
      } else {
        const failed = failure;
        const { next } = await this.#persist(() => store.failLeased(task, failed, owner, clock.now()));
        this.#logFailure(task, failed, claimedAt, clock.now() - started);
        if (failed.retryAt !== null) arm(task.id, failed.retryAt);
        for (const occurrence of next) arm(occurrence.id, occurrence.runAt);
      }
    } catch {
      // Stopping with the database away: the lease will run out and the task runs again.
    }
  }
}
