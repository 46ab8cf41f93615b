/**
 * The task store: runs the statements of sql/tasks.ts and maps their rows (rows.ts). It holds no
 * policy: no retry of a failed task, no recurrence, no dedup decision; those are the lifecycle's
 * (src/lifecycle/). Intake group commit is intake.ts.
 *
 * Methods without a `conn` run on a connection of their own, under the database's deadline, and
 * run again after a deadlock or lock-wait timeout (InnoDB rolled the statement back, so that is
 * safe): the transaction runner's autocommit (src/db/transaction.ts). Methods taking a `conn` run
 * inside the caller's transaction, which `transaction` opens with the same runner.
 *
 * Every write of a task's state is conditional on the state it expects and answers how many rows
 * (or whether the row) it wrote; what a shortfall means is the lifecycle's to decide.
 */
import type mysql from 'mysql2/promise';
import type { Connection, Database } from '../db/connection.js';
import { pipelineOf } from '../db/pipeline.js';
import { lockConflicts } from '../db/retry.js';
import { DB } from '../db/sql.js';
import { autocommit, DEFAULT_TRIES, transaction } from '../db/transaction.js';
import { Intake, type InsertResult } from './intake.js';
import {
  fromRow,
  runAtIsValues,
  runAtValues,
  toEntries,
  type NewTask,
  type RunAtCursor,
  type Task,
  type TaskRow,
  type TimerEntry,
  type Wait,
} from './rows.js';
import { TASK_RUNS } from './sql/task-runs.js';
import { SQL } from './sql/tasks.js';
import { tagTuples } from './tags.js';

export type { InsertResult } from './intake.js';
/** No task waited for its type. */
const NO_WAITS: ReadonlyMap<number, Wait> = new Map();
const NO_RESULTS: ReadonlyMap<number, string> = new Map();

/** markDone's and markRunning's values for the waits: (id, ms) pairs and (id, reason) pairs. */
function waitValues(waited: ReadonlyMap<number, Wait>): { pairs: unknown[]; reasons: unknown[] } {
  const entries = [...waited];
  return { pairs: entries.flatMap(([id, wait]) => [id, wait.ms]), reasons: entries.flatMap(([id, wait]) => [id, wait.reason]) };
}

export type { NewTask, RunAtCursor, Task, TimerEntry } from './rows.js';

/** What happens to a task whose run failed: back to pending at `retryAt`, or failed for good. */
export interface Failure {
  id: number;
  error: string;
  retryAt: number | null;
}

const MAX_ERROR_LENGTH = 2000;

/** A status a task finishes in. */
export type FinishedStatus = 'done' | 'cancelled' | 'skipped' | 'failed';

function clip(error: string): string {
  return error.length > MAX_ERROR_LENGTH ? `${error.slice(0, MAX_ERROR_LENGTH - 1)}…` : error;
}

/**
 * An outside run's call, kept on the task with its result: the HTTP status (0: no answer), how
 * long the handler ran (ms) and the answer's body size as read (bytes); null for what is unknown.
 */
export interface CallRecord {
  httpStatus: number | null;
  durationMs: number;
  responseBytes: number | null;
  /** What the handler answered (lifecycle/history.ts resultOf), kept on a completed task. */
  result?: string | null;
}

/** A run of a task claimed pending, as the claim read it: what its failure expects to find. */
export interface ClaimedRun {
  attempts: number;
  runAt: number;
}

/** An outside run as its claim left it: running under `owner`'s lease, at attempt `attempts`. */
export interface LeasedRun {
  id: number;
  owner: string;
  attempts: number;
}

/** The columns' range: smallint unsigned for a status, int unsigned for the rest. */
function callValues(call: CallRecord): unknown[] {
  const bounded = (value: number | null, max: number) => (value === null ? null : Math.min(Math.max(0, Math.round(value)), max));
  return [bounded(call.httpStatus, 65_535), bounded(call.durationMs, 4_294_967_295), bounded(call.responseBytes, 4_294_967_295)];
}

/** Which tasks a bulk change selects: by a tag, a key prefix, a type, or a list of ids. */
export type Selector = { tag: string } | { keyPrefix: string } | { type: string } | { ids: number[] };

/** Where a pick stands: after an id, a key, or (a type's tasks) a (run_at, id). */
export type PickCursor = number | string | RunAtCursor;

/**
 * How a pick by type walks the type's tasks: in (run_at, id) order or the reverse, all of them or
 * those due before, after or at one instant (epoch ms). The other selectors walk ids or keys,
 * which a change never moves.
 */
export interface TypeWalk {
  descending?: boolean;
  runAt?: { op: '<' | '>' | '='; at: number };
}

/** A task's status. */
export type Status = 'pending' | 'running' | FinishedStatus;

/** The filters of a list by status (GET /tasks) and of its counts. */
export interface ListFilters {
  type?: string;
  tag?: string;
  keyPrefix?: string;
  group?: string;
  /** The tasks of the recurring series whose first task has this id. */
  series?: number;
  /** Due (run_at) at or after this instant (epoch ms). */
  from?: number;
  /** Due before this instant (epoch ms). */
  until?: number;
}

/** A LIKE pattern for "starts with": `!` escapes the prefix's own wildcards. */
function prefixPattern(prefix: string): string {
  return `${prefix.replace(/[!%_]/g, '!$&')}%`;
}

function cursorValues(cursor: RunAtCursor | undefined): unknown[] {
  return cursor === undefined ? [] : [new Date(cursor.runAt), new Date(cursor.runAt), cursor.id];
}

/** The values of AFTER_TYPED_CURSOR (sql/tasks.ts): the instant also as a range on (run_minute, run_at). */
function typedCursorValues(cursor: RunAtCursor | undefined): unknown[] {
  return cursor === undefined ? [] : [...runAtValues(new Date(cursor.runAt)), ...cursorValues(cursor).slice(1)];
}

type Rows<T> = T & mysql.RowDataPacket[];
type Result = mysql.ResultSetHeader;

export class TaskStore {
  readonly #database: Database;
  readonly #intake: Intake;

  /** The types whose tasks get no timer (worker types: the pull hub watches them); read at each refill. */
  readonly #untimed: () => readonly string[];

  constructor(database: Database, untimed: () => readonly string[] = () => []) {
    this.#database = database;
    this.#untimed = untimed;
    this.#intake = new Intake(
      database,
      (key) => this.getByKey(key),
      (keys) => (keys.length === 0 ? Promise.resolve([]) : this.#tasks(SQL.byKeys, [keys])),
    );
  }

  /** One statement on a connection of its own. */
  async #query<T extends mysql.RowDataPacket[] | Result>(sql: string | mysql.QueryOptions, values: unknown[]): Promise<T> {
    const [result] = await autocommit(this.#database, (conn) => conn.query<T>(sql as mysql.QueryOptions, values));
    return result;
  }

  #arrays<T>(sql: string, values: unknown[]): Promise<T[]> {
    return this.#query<Rows<T[]>>({ sql, rowsAsArray: true }, values);
  }

  async #tasks(sql: string, values: unknown[]): Promise<Task[]> {
    return (await this.#query<TaskRow[]>(sql, values)).map(fromRow);
  }

  /**
   * BEGIN … COMMIT, run again from the start after a deadlock or lock-wait timeout (the whole
   * transaction was rolled back): the transaction runner on the pool.
   */
  transaction<T>(fn: (conn: Connection) => Promise<T>, tries = DEFAULT_TRIES): Promise<T> {
    return transaction(this.#database, fn, { retry: lockConflicts(tries) });
  }

  // ── reads ─────────────────────────────────────────────────────────────────────────────────

  async get(id: number): Promise<Task | undefined> {
    return (await this.#tasks(SQL.byId, [id]))[0];
  }

  async getByKey(key: string): Promise<Task | undefined> {
    return (await this.#tasks(SQL.byKey, [key]))[0];
  }

  /**
   * A page of pending tasks bounded in bytes as well as in rows: the rows' sizes are read first,
   * then only the rows that fit within `maxBytes` (at least one), each counted as its stored size
   * plus `rowBytes`. `more` says whether pending tasks follow the page.
   */
  async listPendingWithin(options: {
    type?: string;
    tag?: string;
    keyPrefix?: string;
    limit: number;
    after?: RunAtCursor;
    maxBytes: number;
    rowBytes: number;
  }): Promise<{ tasks: Task[]; more: boolean }> {
    const { type, tag, keyPrefix, after } = options;
    const filter = { type: type !== undefined, tag: tag !== undefined, keyPrefix: keyPrefix !== undefined, cursor: after !== undefined };
    const sizes = await this.#arrays<[number, number]>(SQL.pendingSizes(filter), [
      ...(type === undefined ? [] : [type]),
      ...(tag === undefined ? [] : [tag]),
      ...(keyPrefix === undefined ? [] : [prefixPattern(keyPrefix)]),
      ...(type === undefined ? cursorValues(after) : typedCursorValues(after)),
      options.limit + 1,
    ]);
    const ids: number[] = [];
    let bytes = 0;
    for (const [id, size] of sizes.slice(0, options.limit)) {
      bytes += Number(size) + options.rowBytes;
      if (ids.length > 0 && bytes > options.maxBytes) break;
      ids.push(Number(id));
    }
    if (ids.length === 0) return { tasks: [], more: false };
    return { tasks: await this.#tasks(SQL.pendingByIds, [ids]), more: sizes.length > ids.length };
  }

  /** The pending occurrence of the recurring series whose first task is `seriesId`. */
  async pendingOccurrence(seriesId: number): Promise<Task | undefined> {
    return (await this.#tasks(SQL.pendingOccurrence, [seriesId, seriesId]))[0];
  }

  /** The latest tasks to finish with `status`, newest first. */
  listFinished(status: FinishedStatus, limit: number): Promise<Task[]> {
    return this.#tasks(SQL.finished, [status, limit]);
  }

  /**
   * One page of pending tasks due in (from, until], in (runAt, id) order after `cursor`.
   * `from` undefined means from the beginning of time (the boot load and the reconcile); with
   * `shards`, only the tasks of those shards.
   */
  async pendingDueBetween(
    from: number | undefined,
    until: number,
    cursor: RunAtCursor | undefined,
    limit: number,
    shards?: readonly number[],
  ): Promise<TimerEntry[]> {
    if (shards !== undefined && shards.length === 0) return [];
    const values: unknown[] = from === undefined ? [] : [new Date(from)];
    values.push(new Date(until), ...(shards === undefined ? [] : [shards]), ...cursorValues(cursor), limit);
    const page = toEntries(
      await this.#arrays<[number, number, number]>(SQL.duePage(from !== undefined, cursor !== undefined, shards !== undefined), values),
    );
    // The page is read on the (status, run_at) index alone, which has no type: its worker tasks
    // are found on the (type, status, run_minute, run_at) index, over the page's span, and marked.
    const untimed = this.#untimed();
    if (untimed.length === 0 || page.length === 0) return page;
    const found = await this.#arrays<[number]>(SQL.pendingOfTypesBetween, [
      untimed,
      ...runAtValues(new Date(page[0]!.runAt)),
      ...runAtValues(new Date(page.at(-1)!.runAt)),
    ]);
    if (found.length === 0) return page;
    const ids = new Set(found.map(([id]) => Number(id)));
    for (const entry of page) if (ids.has(entry.id)) entry.untimed = true;
    return page;
  }

  /** Rows with id above `afterId`, any status, in id order: the refill's view of new inserts (`pending`: pending and wants a timer, not a worker type's). */
  async insertedAfter(afterId: number, limit: number): Promise<(TimerEntry & { pending: boolean })[]> {
    const untimed = this.#untimed();
    const rows = await this.#arrays<[number, number, number, number]>(SQL.insertedAfter(untimed.length > 0), [
      ...(untimed.length > 0 ? [untimed] : []),
      afterId,
      limit,
    ]);
    return rows.map(insertedRow);
  }

  /** Rows with an id in one of the inclusive `ranges`, any status: inserts that committed below the id scan. */
  async insertedIn(ranges: readonly (readonly [number, number])[]): Promise<(TimerEntry & { pending: boolean })[]> {
    if (ranges.length === 0) return [];
    const untimed = this.#untimed();
    const rows = await this.#arrays<[number, number, number, number]>(SQL.insertedIn(ranges.length, untimed.length > 0), [
      ...(untimed.length > 0 ? [untimed] : []),
      ...ranges.flat(),
    ]);
    return rows.map(insertedRow);
  }

  /** The pending ones among `ids`, read without locks. */
  async pendingAmong(ids: number[]): Promise<TimerEntry[]> {
    if (ids.length === 0) return [];
    return toEntries(await this.#arrays<[number, number, number]>(SQL.pendingAmong, [ids]));
  }

  /**
   * Clears the finished_at of open tasks that carry one, up to 1,000 a call (the boot and every
   * reconcile call it); answers how many. Read first, then written by id, so that nothing is locked
   * when there are none.
   */
  async mendOpenFinished(): Promise<number> {
    const ids = (await this.#arrays<[number]>(SQL.openFinishedIds, [])).map(([id]) => Number(id));
    if (ids.length === 0) return 0;
    return (await this.#query<Result>(SQL.clearFinishedAt, [ids])).affectedRows;
  }

  async maxId(): Promise<number> {
    const [row] = await this.#arrays<[number]>(SQL.maxId, []);
    return Number(row?.[0] ?? 0);
  }

  /** Tasks waiting, running and failed, in the whole table. */
  async countOpen(): Promise<{ pending: number; running: number; failed: number }> {
    const rows = await this.#query<({ status: string; n: number } & mysql.RowDataPacket)[]>(SQL.countOpen, []);
    const count = (status: string) => Number(rows.find((row) => row.status === status)?.n ?? 0);
    return { pending: count('pending'), running: count('running'), failed: count('failed') };
  }

  /** Pending tasks per type, in the whole table. */
  async countPendingByType(): Promise<Map<string, number>> {
    const rows = await this.#arrays<[string, number]>(SQL.countPendingByType, []);
    return new Map(rows.map(([type, count]) => [type, Number(count)]));
  }

  /** How late (start − run_at, ms, stored by each run) the latest `limit` completed tasks ran, sorted. */
  /** The latest `limit` done runs' lateness (sorted) and the waits of those that waited (sorted). */
  async recentLateness(limit: number): Promise<{ lateness: number[]; waits: number[] }> {
    const rows = await this.#arrays<[number, number]>(SQL.recentLateness, [limit]);
    return {
      lateness: rows.map(([late]) => Number(late)).sort((a, b) => a - b),
      waits: rows
        .map(([, waited]) => Number(waited))
        .filter((waited) => waited > 0)
        .sort((a, b) => a - b),
    };
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
        ? await this.#arrays<[number, string]>(SQL.pickByKeyPrefix, [prefixPattern(selector.keyPrefix), status, cursor ?? '', limit])
        : 'tag' in selector
          ? await this.#arrays<[number, number]>(SQL.pickByTag, [selector.tag, status, cursor ?? 0, limit])
          : selector.ids.length === 0
            ? []
            : await this.#arrays<[number, number]>(SQL.pickByIds, [selector.ids, status, cursor ?? 0, limit]);
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
    const rows = await this.#arrays<[number, number]>(
      SQL.pickByType({ descending: walk.descending === true, bound: bound?.op, cursor: cursor !== undefined }),
      [type, status, ...boundValues, ...typedCursorValues(cursor), limit],
    );
    return rows.map(([id, runAt]) => ({ id: Number(id), cursor: { runAt: Number(runAt), id: Number(id) } }));
  }

  /**
   * A page of the tasks in `status` with the filters, from `offset`: open ones soonest first,
   * finished ones newest first. Bounded in bytes as listPendingWithin is; `more` says whether
   * tasks follow the page. A task that changed status between the two reads is shown as it is now.
   */
  async listByStatus(
    status: Status,
    filters: ListFilters,
    page: { offset: number; limit: number; maxBytes: number; rowBytes: number },
  ): Promise<{ tasks: Task[]; more: boolean }> {
    const finished = status !== 'pending' && status !== 'running';
    const sizes = await this.#arrays<[number, number]>(SQL.listSizes({ ...this.#filterShape(filters), finished }), [
      status,
      ...this.#filterValues(filters),
      page.limit + 1,
      page.offset,
    ]);
    const ids: number[] = [];
    let bytes = 0;
    for (const [id, size] of sizes.slice(0, page.limit)) {
      bytes += Number(size) + page.rowBytes;
      if (ids.length > 0 && bytes > page.maxBytes) break;
      ids.push(Number(id));
    }
    if (ids.length === 0) return { tasks: [], more: false };
    return { tasks: await this.#tasks(SQL.listByIds(finished), [ids]), more: sizes.length > ids.length };
  }

  /** How many tasks of each status the filters hold (every status named, 0 when none). */
  async countByStatus(filters: ListFilters): Promise<Record<Status, number>> {
    const rows = await this.#arrays<[string, number]>(SQL.countByStatus(this.#filterShape(filters)), this.#filterValues(filters));
    const counts: Record<Status, number> = { pending: 0, running: 0, done: 0, failed: 0, cancelled: 0, skipped: 0 };
    for (const [status, n] of rows) if (status in counts) counts[status as Status] = Number(n);
    return counts;
  }

  #filterShape(filters: ListFilters) {
    return {
      type: filters.type !== undefined,
      tag: filters.tag !== undefined,
      keyPrefix: filters.keyPrefix !== undefined,
      group: filters.group !== undefined,
      series: filters.series !== undefined,
      from: filters.from !== undefined,
      until: filters.until !== undefined,
    };
  }

  #filterValues(filters: ListFilters): unknown[] {
    return [
      ...(filters.type === undefined ? [] : [filters.type]),
      ...(filters.tag === undefined ? [] : [filters.tag]),
      ...(filters.keyPrefix === undefined ? [] : [prefixPattern(filters.keyPrefix)]),
      ...(filters.group === undefined ? [] : [filters.group]),
      ...(filters.series === undefined ? [] : [filters.series, filters.series]),
      ...(filters.from === undefined ? [] : [new Date(filters.from)]),
      ...(filters.until === undefined ? [] : [new Date(filters.until)]),
    ];
  }

  // ── writes on a connection of their own ─────────────────────────────────────────────────────

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
    return (await this.#query<Result>(SQL.cancel, [at, at, ids])).affectedRows;
  }

  /** Moves the pending ones among `ids` to `runAt` (read in `timezone`); answers how many. */
  async reschedule(ids: number[], runAt: number, timezone: string, now: number): Promise<number> {
    return (await this.#query<Result>(SQL.reschedule, [new Date(runAt), new Date(runAt), timezone, new Date(now), ids])).affectedRows;
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
    return (await this.#query<Result>(SQL.replacePending, values)).affectedRows === 1;
  }

  /** failed → pending at `runAt` with attempts reset, for the failed ones among `ids`; answers how many. */
  async retry(ids: number[], runAt: number, timezone: string, now: number): Promise<number> {
    return (await this.#query<Result>(SQL.retry, [new Date(runAt), new Date(runAt), timezone, new Date(now), ids])).affectedRows;
  }

  /** failed → pending at `runAt` with attempts reset, each keeping its zone (a bulk retry); answers how many. */
  async retryInZone(ids: number[], runAt: number, now: number): Promise<number> {
    return (await this.#query<Result>(SQL.retryInZone, [new Date(runAt), new Date(runAt), new Date(now), ids])).affectedRows;
  }

  /** Ids of pending tasks with misfire 'skip' whose time passed before `before`; with `shards`, of those shards only. */
  async misfiredIds(before: number, shards?: readonly number[]): Promise<number[]> {
    if (shards !== undefined && shards.length === 0) return [];
    const values = [new Date(before), ...(shards === undefined ? [] : [shards])];
    return (await this.#arrays<[number]>(SQL.misfiredIds(shards !== undefined), values)).map(([id]) => Number(id));
  }

  /** When the first lease of a running task (in `shards`) ends; undefined when none runs. */
  async earliestLeaseEnd(shards?: readonly number[]): Promise<number | undefined> {
    if (shards !== undefined && shards.length === 0) return undefined;
    const [row] = await this.#arrays<[Date | null]>(SQL.earliestLeaseEnd(shards !== undefined), shards === undefined ? [] : [shards]);
    const end = row?.[0];
    return end === undefined || end === null ? undefined : end.getTime();
  }

  /** Ids of running tasks whose lease ran out before `now`; with `shards`, of those shards only. */
  async expiredLeaseIds(now: number, shards?: readonly number[]): Promise<number[]> {
    if (shards !== undefined && shards.length === 0) return [];
    const values = [new Date(now), ...(shards === undefined ? [] : [shards])];
    return (await this.#arrays<[number]>(SQL.expiredLeaseIds(shards !== undefined), values)).map(([id]) => Number(id));
  }

  // ── retention (maintenance/retention.ts): small batches by primary key ────────────────────

  /** Ids of up to `limit` tasks in `status` that finished before `before`; a series' first task stays while the series goes on. */
  async expiredIds(status: FinishedStatus, before: number, limit: number): Promise<number[]> {
    return (await this.#arrays<[number]>(SQL.expiredIds, [status, new Date(before), limit])).map(([id]) => Number(id));
  }

  /**
   * Deletes those of `ids` still in `status` and finished before `before`, and their runs, in one
   * transaction (punctual_task_runs has no foreign key to cascade); answers how many tasks went.
   */
  async deleteExpired(ids: number[], status: FinishedStatus, before: number): Promise<number> {
    if (ids.length === 0) return 0;
    return this.transaction(async (conn) => {
      const [rows] = await conn.query<Rows<[number][]>>({ sql: SQL.lockExpired, rowsAsArray: true }, [ids, status, new Date(before)]);
      const gone = rows.map(([id]) => Number(id));
      if (gone.length === 0) return 0;
      await conn.query(TASK_RUNS.deleteOfTasks, [gone]);
      const [result] = await conn.query<Result>(SQL.deleteByIds, [gone]);
      return result.affectedRows;
    });
  }

  /**
   * Deletes those of `ids` still in one of `statuses`, and their runs, in one transaction (their
   * tags go by the foreign key's cascade); answers the ids that went.
   */
  async deleteIn(ids: number[], statuses: readonly Status[]): Promise<number[]> {
    if (ids.length === 0) return [];
    return this.transaction(async (conn) => {
      const [rows] = await conn.query<Rows<[number][]>>({ sql: SQL.lockToDelete, rowsAsArray: true }, [ids, statuses]);
      const gone = rows.map(([id]) => Number(id));
      if (gone.length === 0) return [];
      await conn.query(TASK_RUNS.deleteOfTasks, [gone]);
      await conn.query(SQL.deleteByIds, [gone]);
      return gone;
    });
  }

  /** Replaces a pending task's payload; answers whether it was still pending. */
  async updatePayload(id: number, payload: unknown, now: number): Promise<boolean> {
    return (await this.#query<Result>(SQL.updatePayload, [JSON.stringify(payload), new Date(now), id])).affectedRows === 1;
  }

  // ── inside the caller's transaction ─────────────────────────────────────────────────────────

  /** Locks the pending, due tasks among `ids` in id order, skipping rows another transaction holds. */
  async lockDue(conn: Connection, ids: number[], now: number): Promise<Task[]> {
    const [rows] = await conn.query<TaskRow[]>(SQL.lockDue, [ids, new Date(now)]);
    return rows.map(fromRow);
  }

  /**
   * The pending ones among `ids` (locked by the caller) done; answers how many. `waited`: how long
   * and what for those that waited for their type waited, by id (kept apart from their lateness).
   * `finish`: when the run ended (default `now`, its start) and the process that ran it, as the
   * run history names it (null: no history).
   */
  async markDone(
    conn: Connection,
    ids: number[],
    now: number,
    waited: ReadonlyMap<number, Wait> = NO_WAITS,
    results: ReadonlyMap<number, string> = NO_RESULTS,
    finish: { at?: number; by?: string | null } = {},
  ): Promise<number> {
    if (ids.length === 0) return 0;
    const at = new Date(now);
    const { pairs, reasons } = waitValues(waited);
    const sql = SQL.markDone(waited.size, results.size);
    const values = [at, ...pairs, ...pairs, ...reasons, ...[...results].flat(), finish.by ?? null, new Date(finish.at ?? now), at, ids];
    const pipeline = pipelineOf(conn);
    if (pipeline !== undefined) {
      // Held back to travel with COMMIT; the server checks the count before it commits, so a
      // count other than all of them never commits: answered as all of them.
      pipeline.queue(sql, values);
      pipeline.queue(DB.expectRowCount, [ids.length]);
      return ids.length;
    }
    return (await conn.query<Result>(sql, values))[0].affectedRows;
  }

  /** The pending ones among `ids` (locked by the caller) running under `owner`'s lease; answers how many. `waited` as for markDone. */
  async markRunning(
    conn: Connection,
    ids: number[],
    owner: string,
    leaseUntil: number,
    now: number,
    waited: ReadonlyMap<number, Wait> = NO_WAITS,
  ): Promise<number> {
    if (ids.length === 0) return 0;
    const { pairs, reasons } = waitValues(waited);
    const values = [new Date(now), ...pairs, ...pairs, ...reasons, owner, new Date(leaseUntil), new Date(now), ids];
    return (await conn.query<Result>(SQL.markRunning(waited.size), values))[0].affectedRows;
  }

  /**
   * Completes a leased run if it is still `run`: running under `run.owner`'s lease, at attempt
   * `run.attempts`. `doneBy` as for markDone. Answers whether it did.
   */
  async completeLeased(conn: Connection, run: LeasedRun, call: CallRecord, now: number, doneBy: string | null = null): Promise<boolean> {
    const at = new Date(now);
    const [result] = await conn.query<Result>(SQL.completeLeased, [
      doneBy,
      at,
      at,
      ...callValues(call),
      call.result ?? null,
      run.id,
      run.owner,
      run.attempts,
    ]);
    return result.affectedRows === 1;
  }

  /**
   * Records a failed run of a task claimed pending, counting its attempt: the error, and pending
   * again at `retryAt` or failed. Written only while the task is still `claimed` (pending, at its
   * attempts and run_at). Answers whether it was.
   */
  async failClaimed(conn: Connection, failure: Failure, claimed: ClaimedRun, now: number): Promise<boolean> {
    const at = new Date(now);
    const retry = failure.retryAt !== null;
    const [result] = await conn.query<Result>(SQL.failClaimed, [
      retry ? 'pending' : 'failed',
      retry ? new Date(failure.retryAt!) : null,
      retry ? null : at,
      clip(failure.error),
      at,
      failure.id,
      claimed.attempts,
      new Date(claimed.runAt),
    ]);
    return result.affectedRows === 1;
  }

  /**
   * Records a failed outside run (the claim counted its attempt) and its call: the error, and
   * pending again at `retryAt` or failed. Written only while it is still `run`. Answers whether it was.
   */
  async failLeased(conn: Connection, failure: Failure, run: LeasedRun, call: CallRecord, now: number): Promise<boolean> {
    const at = new Date(now);
    const retry = failure.retryAt !== null;
    const [result] = await conn.query<Result>(SQL.failLeased, [
      retry ? 'pending' : 'failed',
      retry ? new Date(failure.retryAt!) : null,
      retry ? null : at,
      clip(failure.error),
      at,
      ...callValues(call),
      failure.id,
      run.owner,
      run.attempts,
    ]);
    return result.affectedRows === 1;
  }

  /** Inserts an occurrence of the series `seriesId` (or finds it there already); answers its id. */
  async insertOccurrence(conn: Connection, task: Task, seriesId: number, runAt: number, now: number): Promise<number> {
    const at = new Date(now);
    const [result] = await conn.query<Result>(SQL.insertOccurrence, [
      task.type,
      JSON.stringify(task.payload),
      new Date(runAt),
      task.timezone,
      task.maxAttempts,
      task.misfire,
      task.cron,
      seriesId,
      task.tags.length === 0 ? null : JSON.stringify(task.tags),
      at,
      at,
      task.priority,
    ]);
    // The series keeps its tags, so a bulk change by tag reaches its next occurrence too.
    if (task.tags.length > 0) await conn.query(SQL.insertTags(tagTuples(result.insertId, task.tags), true));
    return result.insertId;
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
    return (await conn.query<Result>(SQL.moveTo, [new Date(runAt), new Date(runAt), timezone, new Date(now), ids]))[0].affectedRows;
  }

  /** Shifts the pending ones among `ids` (locked by the caller); answers how many. */
  async shiftBy(conn: Connection, ids: number[], shiftMs: number, requestId: string, now: number): Promise<number> {
    if (ids.length === 0) return 0;
    return (await conn.query<Result>(SQL.shiftBy, [shiftMs * 1000, shiftMs * 1000, requestId, new Date(now), ids]))[0].affectedRows;
  }

  async lockMisfired(conn: Connection, ids: number[], before: number): Promise<Task[]> {
    const [rows] = await conn.query<TaskRow[]>(SQL.lockMisfired, [ids, new Date(before)]);
    return rows.map(fromRow);
  }

  /** The pending ones among `ids` (locked by the caller) skipped; answers how many. */
  async markSkipped(conn: Connection, ids: number[], reason: string, now: number): Promise<number> {
    if (ids.length === 0) return 0;
    const at = new Date(now);
    return (await conn.query<Result>(SQL.markSkipped, [at, at, reason, ids]))[0].affectedRows;
  }

  /** Locks the running tasks among `ids` whose lease ran out before `now`. */
  async lockExpiredLeases(conn: Connection, ids: number[], now: number): Promise<Task[]> {
    if (ids.length === 0) return [];
    const [rows] = await conn.query<TaskRow[]>(SQL.lockExpiredLeases, [ids, new Date(now)]);
    return rows.map(fromRow);
  }

  /** The locked ones among `ids` whose lease still ran out before `now` failed for good; answers how many. */
  async failExpiredLeases(conn: Connection, ids: number[], now: number): Promise<number> {
    if (ids.length === 0) return 0;
    const at = new Date(now);
    return (await conn.query<Result>(SQL.failExpiredLeases, [at, at, ids, at]))[0].affectedRows;
  }

  /** The locked ones among `ids` whose lease still ran out before `now` pending again; answers how many. */
  async releaseExpiredLeases(conn: Connection, ids: number[], now: number): Promise<number> {
    if (ids.length === 0) return 0;
    const at = new Date(now);
    return (await conn.query<Result>(SQL.releaseExpiredLeases, [at, ids, at]))[0].affectedRows;
  }
}

/** [id, runAt, timed, priority] as read by insertedAfter and insertedIn: `pending` is true for a pending task that wants a timer. */
function insertedRow([id, runAt, pending, priority]: [number, number, number, number]): TimerEntry & { pending: boolean } {
  return { id: Number(id), runAt: Number(runAt), pending: Number(pending) === 1, priority: Number(priority) };
}
