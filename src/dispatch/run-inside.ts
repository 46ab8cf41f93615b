/**
 * The in-transaction executor: runs database handlers (`effect: 'database'`) on the batch's
 * transaction, so their writes commit with their tasks' completion (effect once).
 *
 * The fast path hands each type's tasks to its handler in one call (runBatch), or one by one,
 * without savepoints. When a handler throws there, the batch is rolled back (HandlerThrew) and run
 * again carefully: a savepoint per task, so only the faulty one fails. A handler that overruns
 * its time has its connection killed (HandlerOverran): the whole transaction is gone, and the task
 * is failed on its own. Lock conflicts and lost connections go up untouched: they are nobody's
 * failure.
 */
import type { Logger } from 'pino';
import type { Connection, Database } from '../db/connection.js';
import { isConnectionError, isLockConflict } from '../db/errors.js';
import { DB } from '../db/sql.js';
import type { DatabaseHandler } from '../handlers/handler.js';
import type { Failed } from '../lifecycle/run.js';
import type { Task } from '../store/task-store.js';
import { TimeoutError, withTimeout } from '../util/async.js';

/** A handler threw in the fast path: roll back, and run the batch again with savepoints. */
export class HandlerThrew extends Error {
  /** `taskId` is undefined when a whole-batch call threw. */
  constructor(
    readonly taskId: number | undefined,
    readonly error: unknown,
  ) {
    super('a handler threw');
  }
}

/** A handler overran its time; its connection was killed. */
export class HandlerOverran extends Error {
  constructor(
    readonly task: Task,
    timeoutMs: number,
  ) {
    super(`handler timed out after ${timeoutMs} ms`);
  }
}

export interface InsideRun {
  done: { task: Task; outcome: string }[];
  failures: Failed[];
}

export class InsideExecutor {
  constructor(
    private readonly database: Database,
    private readonly log: Logger,
    /** What becomes of a task whose attempt threw. */
    private readonly failureOf: (task: Task, attemptsUsed: number, error: unknown, now: number) => Failed['failure'],
  ) {}

  /** Runs each handler's tasks, in a fixed order (by type) so two batches lock in the same order. */
  async run(conn: Connection, runnable: Map<DatabaseHandler, Task[]>, careful: boolean, now: number, into: InsideRun): Promise<void> {
    const groups = [...runnable].sort(([a], [b]) => a.type.localeCompare(b.type));
    for (const [handler, tasks] of groups) {
      if (careful) {
        for (const task of tasks) await this.#withSavepoint(conn, handler, task, now, into);
      } else {
        await this.#fast(conn, handler, tasks, now, into);
      }
    }
  }

  /** Runs `handler` with its time limit; an overrun kills the connection and its transaction. */
  #limited<T>(conn: Connection, handler: DatabaseHandler, work: Promise<T>): Promise<T> {
    return withTimeout(work, handler.timeoutMs, () => this.database.kill(conn));
  }

  async #fast(conn: Connection, handler: DatabaseHandler, tasks: Task[], now: number, into: InsideRun): Promise<void> {
    const tx = this.database.drizzleOf(conn);
    const log = this.log;
    if (handler.runBatch !== undefined) {
      let outcomes: (string | void)[];
      try {
        const items = tasks.map((task) => ({ task, payload: task.payload }));
        outcomes = await this.#limited(conn, handler, handler.runBatch({ tx, conn, tasks: items, log, now }));
      } catch (error) {
        if (isLockConflict(error) || isConnectionError(error)) throw error;
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
        if (error instanceof TimeoutError) throw new HandlerOverran(task, handler.timeoutMs);
        if (isLockConflict(error) || isConnectionError(error)) throw error;
        throw new HandlerThrew(task.id, error);
      }
    }
  }

  async #withSavepoint(conn: Connection, handler: DatabaseHandler, task: Task, now: number, into: InsideRun): Promise<void> {
    const tx = this.database.drizzleOf(conn);
    await conn.query(DB.savepoint);
    try {
      const outcome = await this.#limited(conn, handler, handler.run({ tx, conn, task, payload: task.payload, log: this.log, now }));
      await conn.query(DB.releaseSavepoint);
      into.done.push({ task, outcome: outcome || 'done' });
    } catch (error) {
      if (error instanceof TimeoutError) throw new HandlerOverran(task, handler.timeoutMs);
      if (isLockConflict(error) || isConnectionError(error)) throw error;
      await conn.query(DB.rollbackToSavepoint);
      into.failures.push({ task, failure: this.failureOf(task, task.attempts + 1, error, now) });
    }
  }
}
