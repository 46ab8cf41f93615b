/**
 * The executor of database handlers (`effect: 'database'`): runs them on the batch's transaction,
 * so their writes commit with their tasks' completion (effect once).
 *
 * `runFast` hands each type's tasks to its handler in one call (runBatch), or one by one, without
 * savepoints. When a handler throws there, the batch is rolled back (HandlerThrew) and run again
 * with `runCarefully`: a savepoint per task, so only the faulty one fails. A handler that overruns
 * its time has its connection killed (HandlerOverran): the whole transaction is gone, and the task
 * is failed on its own. Lock conflicts and lost connections go up untouched: they are nobody's
 * failure (error-kind.ts).
 */
import type { Logger } from 'pino';
import type { Connection, Database } from '../db/connection.js';
import { pipelineOf } from '../db/pipeline.js';
import { DB } from '../db/sql.js';
import type { DatabaseHandler } from '../handlers/handler.js';
import type { Failed } from '../lifecycle/run.js';
import type { Task } from '../store/task-types.js';
import { withTimeout } from '../util/async.js';
import { HandlerOverran, HandlerThrew, handlerErrorKind } from './error-kind.js';

/** What the database handlers of one batch did: the tasks to complete, the ones to fail. */
export interface DatabaseRuns {
  done: { task: Task; outcome: string }[];
  failures: Failed[];
}

/** The tasks of a batch to run, by their database handler. */
export type Runnable = ReadonlyMap<DatabaseHandler, readonly Task[]>;

export class DatabaseExecutor {
  constructor(
    private readonly database: Database,
    private readonly log: Logger,
    /** What becomes of a task whose attempt threw. */
    private readonly failureOf: (task: Task, attemptsUsed: number, error: unknown, now: number) => Failed['failure'],
  ) {}

  /** The first try of a batch: no savepoints; a handler that throws rolls the batch back (HandlerThrew). */
  async runFast(conn: Connection, runnable: Runnable, now: number, into: DatabaseRuns): Promise<void> {
    for (const [handler, tasks] of inLockOrder(runnable)) await this.#fast(conn, handler, tasks, now, into);
  }

  /** The try after a handler threw: a savepoint per task, so only the faulty one fails. */
  async runCarefully(conn: Connection, runnable: Runnable, now: number, into: DatabaseRuns): Promise<void> {
    for (const [handler, tasks] of inLockOrder(runnable)) {
      for (const task of tasks) await this.#withSavepoint(conn, handler, task, now, into);
    }
  }

  /** Runs `handler` with its time limit; an overrun kills the connection and its transaction. */
  #limited<T>(conn: Connection, handler: DatabaseHandler, work: Promise<T>): Promise<T> {
    return withTimeout(work, handler.timeoutMs, () => this.database.kill(conn));
  }

  async #fast(conn: Connection, handler: DatabaseHandler, tasks: readonly Task[], now: number, into: DatabaseRuns): Promise<void> {
    const tx = this.database.drizzleOf(conn);
    const log = this.log;
    // A pipelined batch (db/pipeline.ts): the handler's writes may travel with the COMMIT.
    const pipeline = pipelineOf(conn);
    const defer = pipeline === undefined ? undefined : (sql: string, values?: unknown[]) => pipeline.queue(sql, values);
    if (handler.runBatch !== undefined) {
      let outcomes: (string | void)[];
      try {
        const items = tasks.map((task) => ({ task, payload: task.payload }));
        outcomes = await this.#limited(conn, handler, handler.runBatch({ tx, conn, defer, tasks: items, log, now }));
      } catch (error) {
        if (isNobodys(error)) throw error;
        throw new HandlerThrew(undefined, error); // which task is unknown: the careful path finds out
      }
      tasks.forEach((task, i) => into.done.push({ task, outcome: outcomes[i] || 'done' }));
      return;
    }
    for (const task of tasks) {
      try {
        const outcome = await this.#limited(conn, handler, handler.run({ tx, conn, task, payload: task.payload, log, now }));
        into.done.push({ task, outcome: outcome || 'done' });
      } catch (error) {
        if (handlerErrorKind(error) === 'overran') throw new HandlerOverran(task, handler.timeoutMs);
        if (isNobodys(error)) throw error;
        throw new HandlerThrew(task.id, error);
      }
    }
  }

  async #withSavepoint(conn: Connection, handler: DatabaseHandler, task: Task, now: number, into: DatabaseRuns): Promise<void> {
    const tx = this.database.drizzleOf(conn);
    await conn.query(DB.savepoint);
    try {
      const outcome = await this.#limited(conn, handler, handler.run({ tx, conn, task, payload: task.payload, log: this.log, now }));
      await conn.query(DB.releaseSavepoint);
      into.done.push({ task, outcome: outcome || 'done' });
    } catch (error) {
      if (handlerErrorKind(error) === 'overran') throw new HandlerOverran(task, handler.timeoutMs);
      if (isNobodys(error)) throw error;
      await conn.query(DB.rollbackToSavepoint);
      into.failures.push({ task, failure: this.failureOf(task, task.attempts + 1, error, now) });
    }
  }
}

/** A lock conflict or a lost connection: not the task's failure, it goes up to the batch. */
function isNobodys(error: unknown): boolean {
  const kind = handlerErrorKind(error);
  return kind === 'lock-conflict' || kind === 'lost-connection';
}

/** By type, so two batches lock in the same order. */
function inLockOrder(runnable: Runnable): [DatabaseHandler, readonly Task[]][] {
  return [...runnable].sort(([a], [b]) => a.type.localeCompare(b.type));
}
