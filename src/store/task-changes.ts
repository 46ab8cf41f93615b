/**
 * Changes to tasks outside a run: creates (group commit, intake.ts), a shop's cancel, reschedule,
 * replace, retry and payload edit, the bulk changes' picks and moves, deletes, and retention's
 * small batches by primary key. Each write is conditional on the state it expects and answers how
 * many rows it wrote. Without a `conn`, a method runs on a connection of its own (statements.ts);
 * with one, inside the caller's transaction. The statements are sql/tasks.ts's.
 */
import type { Connection, Database } from '../db/connection.js';
import { lockConflicts } from '../db/retry.js';
import { DEFAULT_TRIES, transaction } from '../db/transaction.js';
import { Intake } from './intake.js';
import { runAtIsValues, runAtValues } from './rows.js';
import { TASK_RUNS } from './sql/task-runs.js';
import { SQL } from './sql/tasks.js';
import { prefixPattern, Statements, typedCursorValues, type Result, type Rows } from './statements.js';
import type { TaskReads } from './task-reads.js';
import type { FinishedStatus, InsertResult, NewTask, PickCursor, RunAtCursor, Selector, Status, TypeWalk } from './task-types.js';

export class TaskChanges {
  readonly #sql: Statements;
  readonly #intake: Intake;
  readonly #database: Database;

  constructor(database: Database, reads: TaskReads) {
    this.#database = database;
    this.#sql = new Statements(database);
    this.#intake = new Intake(
      database,
      (key) => reads.getByKey(key),
      (keys) => reads.byKeys(keys),
    );
  }

  /** BEGIN … COMMIT, run again from the start after a deadlock or lock-wait timeout. */
  #transaction<T>(fn: (conn: Connection) => Promise<T>, tries = DEFAULT_TRIES): Promise<T> {
    return transaction(this.#database, fn, { retry: lockConflicts(tries) });
  }

  /** Inserts a task (group commit, see intake.ts); committed when this resolves. */
  insert(task: NewTask, now: number): Promise<InsertResult> {
    return this.#intake.insert(task, now);
  }

  /** Inserts a batch's tasks in one transaction (see intake.ts); all committed when this resolves. */
  insertMany(tasks: readonly NewTask[], now: number): Promise<InsertResult[]> {
    return this.#intake.insertMany(tasks, now);
  }

  /** pending → cancelled for the pending ones among `ids`; answers how many. */
  async cancel(ids: number[], now: number): Promise<number> {
    const at = new Date(now);
    return (await this.#sql.query<Result>(SQL.cancel, [at, at, ids])).affectedRows;
  }

  /**
   * Moves the pending ones among `ids` to `runAt` (read in `timezone`); answers how many. A move
   * into the past (allowed by the caller) runs at once: run_at is the move's time, requested_run_at
   * what was asked, so the run's lateness counts from the move (the same for every move below).
   */
  async reschedule(ids: number[], runAt: number, timezone: string, now: number): Promise<number> {
    return (await this.#sql.query<Result>(SQL.reschedule, [new Date(Math.max(runAt, now)), new Date(runAt), timezone, new Date(now), ids]))
      .affectedRows;
  }

  /**
   * Replaces a pending task's content (onKeyConflict "replace"): its payload, zone, priority and
   * instant, the instant held to the ceiling (`ceiling` sets one if the task has none). Answers
   * whether the task was still pending (and of that type, not recurring) and so replaced.
   */
  async replacePending(id: number, task: NewTask, ceiling: number | null, now: number): Promise<boolean> {
    const runAt = new Date(task.runAt);
    const values: unknown[] = [ceiling === null ? null : new Date(ceiling), runAt, runAt, runAt, JSON.stringify(task.payload)];
    values.push(task.timezone, task.priority ?? 0, new Date(now), id, task.type);
    return (await this.#sql.query<Result>(SQL.replacePending, values)).affectedRows === 1;
  }

  /** failed → pending at `runAt` with attempts reset, for the failed ones among `ids`; answers how many. */
  async retry(ids: number[], runAt: number, timezone: string, now: number): Promise<number> {
    return (await this.#sql.query<Result>(SQL.retry, [new Date(Math.max(runAt, now)), new Date(runAt), timezone, new Date(now), ids]))
      .affectedRows;
  }

  /** failed → pending at `runAt` with attempts reset, each keeping its zone (a bulk retry); answers how many. */
  async retryInZone(ids: number[], runAt: number, now: number): Promise<number> {
    return (await this.#sql.query<Result>(SQL.retryInZone, [new Date(Math.max(runAt, now)), new Date(runAt), new Date(now), ids]))
      .affectedRows;
  }

  /** Replaces a pending task's payload; answers whether it was still pending. */
  async updatePayload(id: number, payload: unknown, now: number): Promise<boolean> {
    return (await this.#sql.query<Result>(SQL.updatePayload, [JSON.stringify(payload), new Date(now), id])).affectedRows === 1;
  }

  /**
   * Up to `limit` tasks in `status` a bulk change selects, after `cursor` (the last pick's), each
   * with the cursor that follows it. Read without locks: the change itself is conditional.
   */
  async pick(
    selector: Selector,
    status: Status,
    cursor: PickCursor | undefined,
    limit: number,
    walk: TypeWalk = {},
  ): Promise<{ id: number; cursor: PickCursor }[]> {
    if ('type' in selector) return this.#pickByType(selector.type, status, cursor as RunAtCursor | undefined, limit, walk);
    const rows =
      'keyPrefix' in selector
        ? await this.#sql.arrays<[number, string]>(SQL.pickByKeyPrefix, [prefixPattern(selector.keyPrefix), status, cursor ?? '', limit])
        : 'tag' in selector
          ? await this.#sql.arrays<[number, number]>(SQL.pickByTag, [selector.tag, status, cursor ?? 0, limit])
          : 'all' in selector
            ? await this.#sql.arrays<[number, number]>(SQL.pickAll, [status, cursor ?? 0, limit])
            : selector.ids.length === 0
            ? []
            : await this.#sql.arrays<[number, number]>(SQL.pickByIds, [selector.ids, status, cursor ?? 0, limit]);
    return rows.map(([id, next]) => ({ id: Number(id), cursor: typeof next === 'string' ? next : Number(next) }));
  }

  async #pickByType(
    type: string,
    status: Status,
    cursor: RunAtCursor | undefined,
    limit: number,
    walk: TypeWalk,
  ): Promise<{ id: number; cursor: RunAtCursor }[]> {
    const bound = walk.runAt;
    const boundValues = bound === undefined ? [] : bound.op === '=' ? runAtIsValues(new Date(bound.at)) : runAtValues(new Date(bound.at));
    const rows = await this.#sql.arrays<[number, number]>(
      SQL.pickByType({ descending: walk.descending === true, bound: bound?.op, cursor: cursor !== undefined }),
      [type, status, ...boundValues, ...typedCursorValues(cursor), limit],
    );
    return rows.map(([id, runAt]) => ({ id: Number(id), cursor: { runAt: Number(runAt), id: Number(id) } }));
  }

  /** Locks the pending ones among `ids` for a bulk move. */
  async lockPendingToMove(
    conn: Connection,
    ids: number[],
  ): Promise<{ id: number; runAt: number; timezone: string; requestId: string | null; priority: number; type: string }[]> {
    const [rows] = await conn.query<Rows<[number, number, string, string | null, number, string][]>>(
      { sql: SQL.lockPendingToMove, rowsAsArray: true },
      [ids],
    );
    return rows.map(([id, runAt, timezone, requestId, priority, type]) => ({
      id: Number(id),
      runAt: Number(runAt),
      timezone,
      requestId,
      priority: Number(priority),
      type,
    }));
  }

  /** Moves the pending ones among `ids` (locked by the caller); answers how many. */
  async moveTo(conn: Connection, ids: number[], runAt: number, timezone: string | null, now: number): Promise<number> {
    if (ids.length === 0) return 0;
    return (await conn.query<Result>(SQL.moveTo, [new Date(Math.max(runAt, now)), new Date(runAt), timezone, new Date(now), ids]))[0]
      .affectedRows;
  }

  /** Shifts the pending ones among `ids` (locked by the caller); answers how many. */
  async shiftBy(conn: Connection, ids: number[], shiftMs: number, requestId: string, now: number): Promise<number> {
    if (ids.length === 0) return 0;
    return (await conn.query<Result>(SQL.shiftBy, [shiftMs * 1000, shiftMs * 1000, new Date(now), requestId, new Date(now), ids]))[0]
      .affectedRows;
  }

  /**
   * Deletes those of `ids` still in one of `statuses`, and their runs, in one transaction (their
   * tags go by the foreign key's cascade); answers the ids that went.
   */
  async deleteIn(ids: number[], statuses: readonly Status[]): Promise<number[]> {
    if (ids.length === 0) return [];
    return this.#transaction(async (conn) => {
      const [rows] = await conn.query<Rows<[number][]>>({ sql: SQL.lockToDelete, rowsAsArray: true }, [ids, statuses]);
      const gone = rows.map(([id]) => Number(id));
      if (gone.length === 0) return [];
      await conn.query(TASK_RUNS.deleteOfTasks, [gone]);
      await conn.query(SQL.deleteByIds, [gone]);
      return gone;
    });
  }

  /**
   * Clears the finished_at an open (pending or running) task carries, up to 1,000 a call (the
   * boot and every reconcile call it): punctual never writes one, but a shop's own UPDATE may, and
   * the status index files such a task among the finished. Answers how many. Read first, then
   * written by id, so that nothing is locked when there are none.
   */
  async clearStrayFinishedAt(): Promise<number> {
    const ids = (await this.#sql.arrays<[number]>(SQL.openFinishedIds, [])).map(([id]) => Number(id));
    if (ids.length === 0) return 0;
    return (await this.#sql.query<Result>(SQL.clearFinishedAt, [ids])).affectedRows;
  }

  /** Ids of up to `limit` tasks in `status` that finished before `before`; a series' first task stays while the series goes on. */
  async expiredIds(status: FinishedStatus, before: number, limit: number): Promise<number[]> {
    return (await this.#sql.arrays<[number]>(SQL.expiredIds, [status, new Date(before), limit])).map(([id]) => Number(id));
  }

  /**
   * Deletes those of `ids` still in `status` and finished before `before`, and their runs, in one
   * transaction (punctual_task_runs has no foreign key to cascade); answers how many tasks went.
   */
  async deleteExpired(ids: number[], status: FinishedStatus, before: number): Promise<number> {
    if (ids.length === 0) return 0;
    return this.#transaction(async (conn) => {
      const [rows] = await conn.query<Rows<[number][]>>({ sql: SQL.lockExpired, rowsAsArray: true }, [ids, status, new Date(before)]);
      const gone = rows.map(([id]) => Number(id));
      if (gone.length === 0) return 0;
      await conn.query(TASK_RUNS.deleteOfTasks, [gone]);
      const [result] = await conn.query<Result>(SQL.deleteByIds, [gone]);
      return result.affectedRows;
    });
  }
}
