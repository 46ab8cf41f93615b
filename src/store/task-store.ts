/**
 * The task store: every SQL statement about the tasks table lives here, named for what it does.
 * Statements that compare with "now" take it as a parameter, so tests can move time.
 *
 * The statements on the hot paths (claiming and completing, loading timers, intake) are written
 * out by hand, with times converted to epoch milliseconds by the server, and their text built
 * once; the rest use drizzle's query builder.
 */
import { and, eq, sql } from 'drizzle-orm';
import type mysql from 'mysql2/promise';
import type { Connection, Database, Db } from '../db/connection.js';
import { isDuplicateKey, isLockConflict } from '../db/errors.js';
import { tasks, type MisfirePolicy, type TaskStatus } from '../db/schema.js';
import { nextOccurrence } from '../recurrence.js';
import { sleep } from '../util/async.js';
import { Batcher, type Outcome } from '../util/batcher.js';

/** A task as the service sees it; times are epoch milliseconds. */
export interface Task {
  id: number;
  key: string | null;
  type: string;
  payload: unknown;
  status: TaskStatus;
  runAt: number;
  timezone: string;
  attempts: number;
  maxAttempts: number;
  misfire: MisfirePolicy;
  leaseOwner: string | null;
  leaseUntil: number | null;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  /** Recurring: the cron expression, read in `timezone`. */
  cron: string | null;
  /** Recurring: the id of the series' first task (null on the first task itself). */
  seriesId: number | null;
}

export interface NewTask {
  key: string | null;
  type: string;
  payload: unknown;
  runAt: number;
  timezone: string;
  maxAttempts: number;
  misfire: MisfirePolicy;
  cron: string | null;
}

/** What a timer needs: the id and the time. The rest is read when the task fires. */
export interface TimerEntry {
  id: number;
  runAt: number;
}

/** Position in (runAt, id) order, for keyset pagination. */
export interface RunAtCursor {
  runAt: number;
  id: number;
}

/** What happens to a task whose run failed: back to pending at `retryAt`, or failed for good. */
export interface Failure {
  id: number;
  error: string;
  retryAt: number | null;
}

export type InsertResult = { created: true; task: Task } | { created: false; task: Task };

/** How writing a run's result went: whether it was written, and the next occurrence it made. */
export interface Settled {
  recorded: boolean;
  next: TimerEntry[];
}

const MAX_ERROR_LENGTH = 2000;
/** Creates gathered into one transaction (one commit) at most, and such transactions at once. */
const INSERT_BATCH = 200;
const INSERT_BATCHES_RUNNING = 4;

function clip(error: string): string {
  return error.length > MAX_ERROR_LENGTH ? `${error.slice(0, MAX_ERROR_LENGTH - 1)}…` : error;
}

// ── rows read by hand ───────────────────────────────────────────────────────────────────────

/** A DATETIME(3) column as epoch milliseconds, computed by the server, whatever its time_zone. */
const ms = (column: string) => `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${column}) DIV 1000`;

const TASK_COLUMNS = [
  'id',
  'task_key',
  'type',
  'payload',
  `${ms('run_at')} AS run_at`,
  'timezone',
  'status',
  'attempts',
  'max_attempts',
  'misfire',
  'lease_owner',
  `${ms('lease_until')} AS lease_until`,
  'last_error',
  `${ms('created_at')} AS created_at`,
  `${ms('updated_at')} AS updated_at`,
  `${ms('finished_at')} AS finished_at`,
  'cron',
  'series_id',
].join(', ');

interface RawTaskRow extends mysql.RowDataPacket {
  id: number;
  task_key: string | null;
  type: string;
  payload: unknown;
  run_at: number;
  timezone: string;
  status: TaskStatus;
  attempts: number;
  max_attempts: number;
  misfire: MisfirePolicy;
  lease_owner: string | null;
  lease_until: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
  cron: string | null;
  series_id: number | null;
}

/** MariaDB answers JSON columns as text, MySQL parses them: the same value either way. */
function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

function fromRaw(row: RawTaskRow): Task {
  return {
    id: Number(row.id),
    key: row.task_key,
    type: row.type,
    payload: json(row.payload),
    status: row.status,
    runAt: Number(row.run_at),
    timezone: row.timezone,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    misfire: row.misfire,
    leaseOwner: row.lease_owner,
    leaseUntil: row.lease_until === null ? null : Number(row.lease_until),
    lastError: row.last_error,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    finishedAt: row.finished_at === null ? null : Number(row.finished_at),
    cron: row.cron,
    seriesId: row.series_id === null ? null : Number(row.series_id),
  };
}

/** Rows of [id, runAt ms] (a timer's worth) as entries. */
function toEntries(rows: [number, number][]): TimerEntry[] {
  return rows.map(([id, runAt]) => ({ id: Number(id), runAt: Number(runAt) }));
}

// Statements written out once.
const SQL_LOCK_DUE = `SELECT ${TASK_COLUMNS} FROM tasks WHERE id IN (?) AND status = 'pending' AND run_at <= ? ORDER BY id FOR UPDATE SKIP LOCKED`;
const SQL_MARK_DONE = `UPDATE tasks SET status = 'done', attempts = attempts + 1, finished_at = ?, updated_at = ? WHERE id IN (?)`;
const SQL_MARK_RUNNING = `UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_owner = ?, lease_until = ?, updated_at = ? WHERE id IN (?)`;
const SQL_INSERT_ROWS =
  'INSERT INTO tasks (task_key, type, payload, run_at, timezone, max_attempts, misfire, cron, created_at, updated_at) VALUES';
const ROW_PLACEHOLDERS = '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';
// The next occurrence of a series; if it is there already, LAST_INSERT_ID answers its id.
const SQL_INSERT_OCCURRENCE = `INSERT INTO tasks (type, payload, run_at, timezone, max_attempts, misfire, cron, series_id, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`;
const SQL_PENDING_AMONG = `SELECT id, ${ms('run_at')} FROM tasks WHERE id IN (?) AND status = 'pending'`;
const SQL_INSERTED_AFTER = `SELECT id, ${ms('run_at')}, status = 'pending' FROM tasks WHERE id > ? ORDER BY id LIMIT ?`;
// (run_at, id) after a cursor, one form for every keyset page: the leading `run_at >= ?` states
// the index range's start outright, the OR only breaks ties within one run_at.
const AFTER_CURSOR = ' AND run_at >= ? AND (run_at > ? OR id > ?)';
const SQL_DUE_PAGE = (lower: boolean, cursor: boolean) =>
  `SELECT id, ${ms('run_at')} FROM tasks WHERE status = 'pending'${lower ? ' AND run_at > ?' : ''} AND run_at <= ?` +
  `${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`;
const SQL_PENDING_PAGE = (type: boolean, cursor: boolean) =>
  `SELECT ${TASK_COLUMNS} FROM tasks WHERE status = 'pending'${type ? ' AND type = ?' : ''}${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`;

// What a row weighs in a page, read without bringing the payload over: page bounds are set on it.
const SQL_PENDING_SIZES = (type: boolean, cursor: boolean) =>
  `SELECT id, LENGTH(payload) + COALESCE(LENGTH(last_error), 0) + COALESCE(LENGTH(task_key), 0) FROM tasks WHERE status = 'pending'` +
  `${type ? ' AND type = ?' : ''}${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`;
const SQL_PENDING_BY_IDS = `SELECT ${TASK_COLUMNS} FROM tasks WHERE id IN (?) AND status = 'pending' ORDER BY run_at, id`;

function cursorValues(cursor: RunAtCursor | undefined): unknown[] {
  return cursor === undefined ? [] : [new Date(cursor.runAt), new Date(cursor.runAt), cursor.id];
}

/**
 * Runs a single statement again after a deadlock or a lock-wait timeout (e.g. a cancel meeting a
 * batch that completes the same task): InnoDB rolled the statement back, so trying again is safe.
 */
async function retryConflicts<T>(statement: () => Promise<T>, tries = 5): Promise<T> {
  for (let round = 1; ; round++) {
    try {
      return await statement();
    } catch (error) {
      if (!isLockConflict(error) || round >= tries) throw error;
      await sleep(10 * round + Math.random() * 40);
    }
  }
}

export class TaskStore {
  readonly #database: Database;
  readonly #inserts: Batcher<{ task: NewTask; now: number }, InsertResult>;

  constructor(database: Database) {
    this.#database = database;
    this.#inserts = new Batcher((items) => this.#insertBatch(items), INSERT_BATCH, INSERT_BATCHES_RUNNING);
  }

  /** drizzle on a connection of its own, under the database's deadline. */
  #drizzle<T>(fn: (db: Db) => PromiseLike<T>): Promise<T> {
    return retryConflicts(() => this.#database.withConnection((conn) => fn(this.#database.drizzleOf(conn))));
  }

  /** One statement on a connection of its own, under the database's deadline. */
  async #query<T extends mysql.RowDataPacket[] | mysql.ResultSetHeader>(
    options: string | mysql.QueryOptions,
    values: unknown[],
  ): Promise<T> {
    return retryConflicts(() =>
      this.#database.withConnection(async (conn) => {
        const [result] = await conn.query<T>(options as mysql.QueryOptions, values);
        return result;
      }),
    );
  }

  // ── the shop's requests ────────────────────────────────────────────────────────────────────

  /**
   * Inserts a task; committed when this resolves. Creates arriving together are written by one
   * statement (or one transaction), so they share a commit. A repeated `key` does not insert: the
   * existing task comes back with `created: false` for the caller to compare.
   */
  insert(task: NewTask, now: number): Promise<InsertResult> {
    return this.#inserts.add({ task, now });
  }

  /** Two batches racing on the same keys in opposite orders can deadlock; the loser runs again. */
  #insertBatch(items: { task: NewTask; now: number }[]): Promise<Outcome<InsertResult>[]> {
    return retryConflicts(() => this.#insertOnce(items), 3);
  }

  async #insertOnce(items: { task: NewTask; now: number }[]): Promise<Outcome<InsertResult>[]> {
    const ids = await this.#database.insertIds();
    if (ids !== 'one-by-one' && items.length > 1) {
      try {
        return await this.#insertAll(items, ids);
      } catch (error) {
        // A key already taken fails the whole statement: then one statement per row sorts it out.
        if (!isDuplicateKey(error)) throw error;
      }
    }
    return this.#insertOneByOne(items);
  }

  /** One multi-row INSERT, committed on its own. */
  async #insertAll(items: { task: NewTask; now: number }[], ids: 'returning' | 'consecutive'): Promise<Outcome<InsertResult>[]> {
    const values = items.map(({ task, now }) => this.#row(task, now));
    const text = `${SQL_INSERT_ROWS} ${items.map(() => ROW_PLACEHOLDERS).join(', ')}${ids === 'returning' ? ' RETURNING id' : ''}`;
    // Not #query: #insertBatch already tries the whole batch again after a lock conflict.
    const [result] = await this.#database.withConnection((conn) =>
      conn.query<mysql.ResultSetHeader & ({ id: number } & mysql.RowDataPacket)[]>(text, values.flat()),
    );
    const idOf = (i: number) => (ids === 'returning' ? Number(result[i]!.id) : result.insertId + i);
    return items.map(({ task, now }, i) => ({ ok: true, value: { created: true, task: this.#created(task, idOf(i), now) } }));
  }

  /** One statement per row in one transaction: a taken key fails its own row only. */
  async #insertOneByOne(items: { task: NewTask; now: number }[]): Promise<Outcome<InsertResult>[]> {
    const duplicates: number[] = [];
    const outcomes = await this.#database.transaction(async (_tx, conn) => {
      const written: Outcome<InsertResult>[] = [];
      for (const [i, { task, now }] of items.entries()) {
        try {
          const [result] = await conn.query<mysql.ResultSetHeader>(`${SQL_INSERT_ROWS} ${ROW_PLACEHOLDERS}`, this.#row(task, now));
          written.push({ ok: true, value: { created: true, task: this.#created(task, result.insertId, now) } });
        } catch (error) {
          // A duplicate key fails its own statement only: the transaction goes on without it.
          if (task.key === null || !isDuplicateKey(error)) throw error;
          written.push({ ok: false, error });
          duplicates.push(i);
        }
      }
      return written;
    });
    for (const i of duplicates) {
      const existing = await this.getByKey(items[i]!.task.key!);
      if (existing !== undefined) outcomes[i] = { ok: true, value: { created: false, task: existing } };
    }
    return outcomes;
  }

  #row(task: NewTask, now: number): unknown[] {
    const at = new Date(now);
    return [
      task.key,
      task.type,
      JSON.stringify(task.payload),
      new Date(task.runAt),
      task.timezone,
      task.maxAttempts,
      task.misfire,
      task.cron,
      at,
      at,
    ];
  }

  #created(task: NewTask, id: number, now: number): Task {
    return {
      ...task,
      id,
      status: 'pending',
      attempts: 0,
      leaseOwner: null,
      leaseUntil: null,
      lastError: null,
      createdAt: now,
      updatedAt: now,
      finishedAt: null,
      seriesId: null,
    };
  }

  /** Whole tasks, read by hand and mapped in one place. */
  async #tasks(where: string, values: unknown[]): Promise<Task[]> {
    return (await this.#query<RawTaskRow[]>(`SELECT ${TASK_COLUMNS} FROM tasks ${where}`, values)).map(fromRaw);
  }

  async get(id: number): Promise<Task | undefined> {
    return (await this.#tasks('WHERE id = ?', [id]))[0];
  }

  async getByKey(key: string): Promise<Task | undefined> {
    return (await this.#tasks('WHERE task_key = ?', [key]))[0];
  }

  /** Pending tasks in (runAt, id) order, strictly after `cursor`. */
  async listPending(options: { type?: string; limit: number; after?: RunAtCursor }): Promise<Task[]> {
    const rows = await this.#query<RawTaskRow[]>(SQL_PENDING_PAGE(options.type !== undefined, options.after !== undefined), [
      ...(options.type === undefined ? [] : [options.type]),
      ...cursorValues(options.after),
      options.limit,
    ]);
    return rows.map(fromRaw);
  }

  /**
   * A page of pending tasks bounded in bytes as well as in rows: the rows' sizes are read first,
   * then only the rows that fit within `maxBytes` (at least one), each counted as its stored size
   * plus `rowBytes`. `more` says whether pending tasks follow the page.
   */
  async listPendingWithin(options: {
    type?: string;
    limit: number;
    after?: RunAtCursor;
    maxBytes: number;
    rowBytes: number;
  }): Promise<{ tasks: Task[]; more: boolean }> {
    const filter = [...(options.type === undefined ? [] : [options.type]), ...cursorValues(options.after)];
    const sizes = await this.#query<[number, number][] & mysql.RowDataPacket[]>(
      { sql: SQL_PENDING_SIZES(options.type !== undefined, options.after !== undefined), rowsAsArray: true },
      [...filter, options.limit + 1],
    );
    const ids: number[] = [];
    let bytes = 0;
    for (const [id, size] of sizes.slice(0, options.limit)) {
      bytes += Number(size) + options.rowBytes;
      if (ids.length > 0 && bytes > options.maxBytes) break;
      ids.push(Number(id));
    }
    if (ids.length === 0) return { tasks: [], more: false };
    const rows = await this.#query<RawTaskRow[]>(SQL_PENDING_BY_IDS, [ids]);
    return { tasks: rows.map(fromRaw), more: sizes.length > ids.length };
  }

  /** pending → cancelled. False when the task is not pending (or does not exist). */
  async cancel(id: number, now: number): Promise<boolean> {
    const at = new Date(now);
    const [result] = await this.#drizzle((db) =>
      db
        .update(tasks)
        .set({ status: 'cancelled', finishedAt: at, updatedAt: at })
        .where(and(eq(tasks.id, id), eq(tasks.status, 'pending'))),
    );
    return result.affectedRows === 1;
  }

  /** failed → pending at `runAt`, its attempts reset. False when the task is not failed. */
  async retry(id: number, runAt: number, timezone: string, now: number): Promise<boolean> {
    const [result] = await this.#drizzle((db) =>
      db
        .update(tasks)
        .set({ status: 'pending', attempts: 0, runAt: new Date(runAt), timezone, finishedAt: null, updatedAt: new Date(now) })
        .where(and(eq(tasks.id, id), eq(tasks.status, 'failed'))),
    );
    return result.affectedRows === 1;
  }

  /** The pending occurrence of the recurring series whose first task is `seriesId`. */
  async pendingOccurrence(seriesId: number): Promise<Task | undefined> {
    const [task] = await this.#tasks("WHERE status = 'pending' AND (id = ? OR series_id = ?) ORDER BY run_at LIMIT 1", [
      seriesId,
      seriesId,
    ]);
    return task;
  }

  /** Moves a pending task to `runAt` (read in `timezone`). False when it is not pending. */
  async reschedule(id: number, runAt: number, timezone: string, now: number): Promise<boolean> {
    const [result] = await this.#drizzle((db) =>
      db
        .update(tasks)
        .set({ runAt: new Date(runAt), timezone, updatedAt: new Date(now) })
        .where(and(eq(tasks.id, id), eq(tasks.status, 'pending'))),
    );
    return result.affectedRows === 1;
  }

  // ── the scheduler ─────────────────────────────────────────────────────────────────────────

  /** Pending tasks with misfire 'skip' whose time passed before `before` become skipped. */
  async skipMisfired(before: number, now: number): Promise<number> {
    // Read first, then lock and update by id: a range UPDATE would lock every overdue row it
    // walks past, and deadlock with the batches of a process that is still running them.
    const ids = await this.#query<[number][] & mysql.RowDataPacket[]>(
      { sql: "SELECT id FROM tasks WHERE status = 'pending' AND run_at < ? AND misfire = 'skip'", rowsAsArray: true },
      [new Date(before)],
    );
    const at = new Date(now);
    let skipped = 0;
    for (let i = 0; i < ids.length; i += 1000) {
      const chunk = ids.slice(i, i + 1000).map(([id]) => Number(id));
      skipped += await retryConflicts(() =>
        this.#database.transaction(async (_tx, conn) => {
          const [rows] = await conn.query<RawTaskRow[]>(
            `SELECT ${TASK_COLUMNS} FROM tasks WHERE id IN (?) AND status = 'pending' AND run_at < ? FOR UPDATE`,
            [chunk, new Date(before)],
          );
          if (rows.length === 0) return 0;
          const lapsed = rows.map(fromRaw);
          await conn.query("UPDATE tasks SET status = 'skipped', finished_at = ?, updated_at = ?, last_error = ? WHERE id IN (?)", [
            at,
            at,
            'skipped: its time passed while punctual was down',
            lapsed.map((task) => task.id),
          ]);
          // A skipped occurrence does not end its series.
          await this.insertNextOccurrences(conn, lapsed, now);
          return lapsed.length;
        }),
      );
    }
    return skipped;
  }

  /**
   * Running tasks whose lease ran out (their process died mid-run) are pending again, or failed
   * when they have used all their attempts.
   */
  async recoverExpiredLeases(now: number): Promise<{ recovered: number; failed: number }> {
    const at = new Date(now);
    const failed = await retryConflicts(() =>
      this.#database.transaction(async (_tx, conn) => {
        const [rows] = await conn.query<RawTaskRow[]>(
          `SELECT ${TASK_COLUMNS} FROM tasks WHERE status = 'running' AND lease_until < ? AND attempts >= max_attempts FOR UPDATE`,
          [at],
        );
        if (rows.length === 0) return 0;
        const spent = rows.map(fromRaw);
        await conn.query(
          `UPDATE tasks SET status = 'failed', lease_owner = NULL, lease_until = NULL, finished_at = ?, updated_at = ?,
             last_error = CONCAT('lease expired on its last attempt; ', COALESCE(last_error, '')) WHERE id IN (?)`,
          [at, at, spent.map((task) => task.id)],
        );
        await this.insertNextOccurrences(conn, spent, now);
        return spent.length;
      }),
    );
    const recovered = await this.#query<mysql.ResultSetHeader>(
      "UPDATE tasks SET status = 'pending', lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE status = 'running' AND lease_until < ?",
      [at, at],
    );
    return { recovered: recovered.affectedRows, failed };
  }

  /**
   * One page of pending tasks due in (from, until], in (runAt, id) order after `cursor`.
   * `from` undefined means from the beginning of time (the boot load and the reconcile).
   * Read from the (status, run_at) index alone.
   */
  pendingDueBetween(from: number | undefined, until: number, cursor: RunAtCursor | undefined, limit: number): Promise<TimerEntry[]> {
    const values: unknown[] = [];
    if (from !== undefined) values.push(new Date(from));
    values.push(new Date(until));
    values.push(...cursorValues(cursor), limit);
    return this.#query<[number, number][] & mysql.RowDataPacket[]>(
      { sql: SQL_DUE_PAGE(from !== undefined, cursor !== undefined), rowsAsArray: true },
      values,
    ).then(toEntries);
  }

  /** Rows with id above `afterId`, any status, in id order: the refill's view of new inserts. */
  async insertedAfter(afterId: number, limit: number): Promise<(TimerEntry & { pending: boolean })[]> {
    const rows = await this.#query<[number, number, number][] & mysql.RowDataPacket[]>({ sql: SQL_INSERTED_AFTER, rowsAsArray: true }, [
      afterId,
      limit,
    ]);
    return rows.map(([id, runAt, pending]) => ({ id: Number(id), runAt: Number(runAt), pending: Number(pending) === 1 }));
  }

  /** The pending ones among `ids`, read without locks. */
  pendingAmong(ids: number[]): Promise<TimerEntry[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.#query<[number, number][] & mysql.RowDataPacket[]>({ sql: SQL_PENDING_AMONG, rowsAsArray: true }, [ids]).then(toEntries);
  }

  /** The latest tasks to finish with `status`, newest first. */
  listFinished(status: 'done' | 'failed' | 'skipped' | 'cancelled', limit: number): Promise<Task[]> {
    return this.#tasks('WHERE status = ? ORDER BY finished_at DESC, id DESC LIMIT ?', [status, limit]);
  }

  /** Tasks waiting, running and failed, in the whole table. */
  async countOpen(): Promise<{ pending: number; running: number; failed: number }> {
    const rows = await this.#query<({ status: string; n: number } & mysql.RowDataPacket)[]>(
      "SELECT status, COUNT(*) AS n FROM tasks WHERE status IN ('pending', 'running', 'failed') GROUP BY status",
      [],
    );
    const count = (status: string) => Number(rows.find((row) => row.status === status)?.n ?? 0);
    return { pending: count('pending'), running: count('running'), failed: count('failed') };
  }

  /** How late (finished_at − run_at, ms) the latest `limit` completed tasks ran, sorted. */
  async recentLateness(limit: number): Promise<number[]> {
    const rows = await this.#query<[number][] & mysql.RowDataPacket[]>(
      {
        sql: `SELECT TIMESTAMPDIFF(MICROSECOND, run_at, finished_at) / 1000 FROM tasks WHERE status = 'done' ORDER BY finished_at DESC LIMIT ?`,
        rowsAsArray: true,
      },
      [limit],
    );
    return rows.map(([late]) => Number(late)).sort((a, b) => a - b);
  }

  /** Pending tasks per type, in the whole table. */
  async countPendingByType(): Promise<Map<string, number>> {
    const rows = await this.#drizzle((db) =>
      db
        .select({ type: tasks.type, count: sql<number>`COUNT(*)`.mapWith(Number) })
        .from(tasks)
        .where(eq(tasks.status, 'pending'))
        .groupBy(tasks.type),
    );
    return new Map(rows.map((row) => [row.type, row.count]));
  }

  async maxId(): Promise<number> {
    const rows = await this.#drizzle((db) => db.select({ max: sql<number | null>`MAX(${tasks.id})`.mapWith(Number) }).from(tasks));
    return rows[0]?.max ?? 0;
  }

  // ── recurring tasks ───────────────────────────────────────────────────────────────────────

  /**
   * Writes the next occurrence of each recurring task among `finished` (done, failed for good or
   * skipped), on `conn`: inside the transaction that finished them, so a series neither stops nor
   * doubles. Answers the occurrences, to be armed after COMMIT.
   */
  async insertNextOccurrences(conn: Connection, finished: Task[], now: number): Promise<TimerEntry[]> {
    const next: TimerEntry[] = [];
    const at = new Date(now);
    for (const task of finished) {
      if (task.cron === null) continue;
      const runAt = nextOccurrence(task.cron, task.timezone, Math.max(task.runAt, now));
      if (runAt === null) continue;
      const [result] = await conn.query<mysql.ResultSetHeader>(SQL_INSERT_OCCURRENCE, [
        task.type,
        JSON.stringify(task.payload),
        new Date(runAt),
        task.timezone,
        task.maxAttempts,
        task.misfire,
        task.cron,
        task.seriesId ?? task.id,
        at,
        at,
      ]);
      next.push({ id: result.insertId, runAt });
    }
    return next;
  }

  // ── the dispatcher (inside its transaction) ───────────────────────────────────────────────

  /**
   * Locks the tasks among `ids` that are pending and due, in id order. Rows another transaction
   * holds are skipped, not waited for: that transaction is running them.
   */
  async lockDue(conn: Connection, ids: number[], now: number): Promise<Task[]> {
    const [rows] = await conn.query<RawTaskRow[]>(SQL_LOCK_DUE, [ids, new Date(now)]);
    return rows.map(fromRaw);
  }

  /** Completes tasks run in this transaction: one attempt used, done. */
  async markDone(conn: Connection, ids: number[], now: number): Promise<void> {
    if (ids.length === 0) return;
    const at = new Date(now);
    await conn.query(SQL_MARK_DONE, [at, at, ids]);
  }

  /** Claims tasks for an outside handler: running, with a lease that ends at `leaseUntil`. */
  async markRunning(conn: Connection, ids: number[], owner: string, leaseUntil: number, now: number): Promise<void> {
    if (ids.length === 0) return;
    await conn.query(SQL_MARK_RUNNING, [owner, new Date(leaseUntil), new Date(now), ids]);
  }

  /**
   * Records a failed run inside a batch: the error, and either pending again at `retryAt` or
   * failed. `countAttempt` is false when the attempt was already counted by the claim.
   */
  async recordFailure(conn: Connection, failure: Failure, countAttempt: boolean, now: number): Promise<void> {
    await this.#failureStatement(conn, failure, countAttempt, now);
  }

  /** The failure's UPDATE; with `owner`, only while this process still holds the task's lease. */
  #failureStatement(conn: Connection, failure: Failure, countAttempt: boolean, now: number, owner?: string) {
    const at = new Date(now);
    const retry = failure.retryAt !== null;
    return conn.query<mysql.ResultSetHeader>(
      `UPDATE tasks SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, attempts = attempts + ?,
         last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
       WHERE id = ?${owner === undefined ? '' : " AND status = 'running' AND lease_owner = ?"}`,
      [
        retry ? 'pending' : 'failed',
        retry ? new Date(failure.retryAt!) : null,
        retry ? null : at,
        countAttempt ? 1 : 0,
        clip(failure.error),
        at,
        failure.id,
        ...(owner === undefined ? [] : [owner]),
      ],
    );
  }

  /**
   * Completes a task an outside handler ran, if this process still holds its lease, and writes
   * its next occurrence when it recurs. Answers whether the lease was still held.
   */
  completeLeased(task: Task, owner: string, now: number): Promise<Settled> {
    const at = new Date(now);
    return this.#settleAlone(
      task,
      now,
      (conn) =>
        conn.query<mysql.ResultSetHeader>(
          `UPDATE tasks SET status = 'done', finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL
          WHERE id = ? AND status = 'running' AND lease_owner = ?`,
          [at, at, task.id, owner],
        ),
      true,
    );
  }

  /** Records a failed outside run, if this process still holds the task's lease. */
  failLeased(task: Task, failure: Failure, owner: string, now: number): Promise<Settled> {
    return this.#settleAlone(task, now, (conn) => this.#failureStatement(conn, failure, false, now, owner), failure.retryAt === null);
  }

  /** Records a failed run outside any batch (a handler that overran), counting the attempt. */
  failAlone(task: Task, failure: Failure, now: number): Promise<Settled> {
    return this.#settleAlone(task, now, (conn) => this.#failureStatement(conn, failure, true, now), failure.retryAt === null);
  }

  /** One statement that ends (or retries) a task, and its next occurrence when it ended, in a transaction. */
  #settleAlone(
    task: Task,
    now: number,
    statement: (conn: Connection) => Promise<[mysql.ResultSetHeader, unknown]>,
    final: boolean,
  ): Promise<Settled> {
    return retryConflicts(() =>
      this.#database.transaction(async (_tx, conn) => {
        const [result] = await statement(conn);
        const recorded = result.affectedRows === 1;
        const next = recorded && final ? await this.insertNextOccurrences(conn, [task], now) : [];
        return { recorded, next };
      }),
    );
  }
}
