/**
 * The store of pull leases: worker types' due tasks locked for a lease, the leases that ran out,
 * the counts a type's maxConcurrency needs, when the next task of a type falls due, and the
 * worker's settles. Statements: sql/pulls.ts. Methods taking a `conn` run inside the caller's
 * transaction; the others on a connection of their own. See docs/workers.md.
 */
import type mysql from 'mysql2/promise';
import type { Connection, Database } from '../db/connection.js';
import { pipelineOf } from '../db/pipeline.js';
import { lockConflicts } from '../db/retry.js';
import { DB } from '../db/sql.js';
import { autocommit, DEFAULT_TRIES, transaction } from '../db/transaction.js';
import { fromRow, runAtValues, type TaskRow } from './rows.js';
import type { Task } from './task-types.js';
import { PULL_SQL } from './sql/pulls.js';

type Result = mysql.ResultSetHeader;
type Rows<T> = T & mysql.RowDataPacket[];

/** The lease a worker holds: the task and its token. */
export interface HeldLease {
  id: number;
  token: string;
}

/** How the worker's nack leaves the task: pending again at `retryAt`, or failed for good (null). */
export interface PullFailure {
  error: string;
  retryAt: number | null;
}

export class PullStore {
  constructor(private readonly database: Database) {}

  /**
   * BEGIN … COMMIT for a lease, a group of acks or a nack, pipelined where the server allows it
   * (db/pipeline.ts): BEGIN travels with the first statement, and the lease's or the acks' UPDATE,
   * with the server's check of its row count, travels with COMMIT. Two round trips, not four.
   */
  async transaction<T>(fn: (conn: Connection) => Promise<T>): Promise<T> {
    return transaction(this.database, fn, { retry: lockConflicts(DEFAULT_TRIES), pipelined: await this.database.pipelines() });
  }

  /**
   * Up to `limit` due pending tasks of `types`, oldest first, locked (SKIP LOCKED), and when the
   * next pending task of `types` falls due after `now` (undefined: none). In a pipelined
   * transaction the two statements are one text, one round trip. Elsewhere they are two: on a
   * Galera node a replicated write that aborts the transaction between them would not stop the
   * text, and the lease would be written after the abort, outside any transaction
   * (db/connection.ts, pipelines).
   */
  async lockDue(
    conn: Connection,
    types: readonly string[],
    limit: number,
    now: number,
  ): Promise<{ locked: Task[]; next: number | undefined }> {
    if (types.length === 0 || limit <= 0) return { locked: [], next: undefined };
    const at = new Date(now);
    const lockValues = [types, ...runAtValues(at), limit];
    const nextSql = PULL_SQL.nextDueOfTypes(types.length);
    const nextValues = types.flatMap((type) => [type, ...runAtValues(at)]);
    let rows: TaskRow[];
    let nextRows: Rows<{ next_due: number | null }[]>;
    if (pipelineOf(conn) === undefined) {
      [rows] = await conn.query<TaskRow[]>(PULL_SQL.lockDueOfTypes, lockValues);
      [nextRows] = await conn.query<Rows<{ next_due: number | null }[]>>(nextSql, nextValues);
    } else {
      const sql = `${PULL_SQL.lockDueOfTypes};\n${nextSql}`;
      const options = { sql, values: [...lockValues, ...nextValues], statements: 2 };
      [[rows, nextRows]] = await conn.query<[TaskRow[], Rows<{ next_due: number | null }[]>]>(options);
    }
    const next = nextRows[0]?.next_due;
    return { locked: rows.map(fromRow), next: next === null || next === undefined ? undefined : Number(next) };
  }

  /**
   * Leases the pending tasks of `rows`, each to its own token until its own instant (running, one
   * attempt counted), in one statement; answers how many it leased (a row no longer pending is not).
   */
  async leaseRows(conn: Connection, rows: readonly { id: number; token: string; leaseUntil: number }[], now: number): Promise<number> {
    if (rows.length === 0) return 0;
    const at = new Date(now);
    const ids = rows.map((row) => row.id);
    const values = [at, ids, rows.map((row) => row.token), ids, rows.map((row) => new Date(row.leaseUntil)), at, ids];
    return this.#expecting(conn, PULL_SQL.leaseRows, values, rows.length);
  }

  /** Ids of up to `limit` running tasks of `types` whose lease ran out before `now`. */
  async expiredIds(types: readonly string[], now: number, limit: number): Promise<number[]> {
    if (types.length === 0) return [];
    const rows = await autocommit(this.database, async (conn) => {
      const [found] = await conn.query<Rows<[number][]>>({ sql: PULL_SQL.expiredOfTypes, rowsAsArray: true }, [
        types,
        new Date(now),
        limit,
      ]);
      return found;
    });
    return rows.map(([id]) => Number(id));
  }

  /** Tasks of `type` under a lease that has not run out (the whole fleet's). */
  async leasedOf(conn: Connection, type: string, now: number): Promise<number> {
    const [rows] = await conn.query<Rows<[number][]>>({ sql: PULL_SQL.leasedOfType, rowsAsArray: true }, [type, new Date(now)]);
    return Number(rows[0]?.[0] ?? 0);
  }

  /** The earliest instant at which a task of `types` falls due or a lease of theirs runs out; undefined when none. */
  async nextAt(types: readonly string[]): Promise<number | undefined> {
    if (types.length === 0) return undefined;
    return autocommit(this.database, async (conn) => {
      let next: number | undefined;
      for (const type of types) {
        const [rows] = await conn.query<Rows<[number | null, number | null][]>>({ sql: PULL_SQL.nextOfType, rowsAsArray: true }, [
          type,
          type,
        ]);
        for (const value of rows[0] ?? []) {
          if (value !== null && (next === undefined || Number(value) < next)) next = Number(value);
        }
      }
      return next;
    });
  }

  /** The tasks among `ids`, locked by the caller's transaction. */
  async lockByIds(conn: Connection, ids: readonly number[]): Promise<Task[]> {
    if (ids.length === 0) return [];
    const [rows] = await conn.query<TaskRow[]>(PULL_SQL.lockByIds, [ids]);
    return rows.map(fromRow);
  }

  /**
   * Done, for those of `ids` whose lease `token` is held at `now`; answers how many. `doneBy`: the
   * run's holder as the run history names it (null: no history).
   */
  async ackMany(conn: Connection, ids: readonly number[], token: string, now: number, doneBy: string | null = null): Promise<number> {
    if (ids.length === 0) return 0;
    const at = new Date(now);
    return this.#expecting(conn, PULL_SQL.ackMany, [doneBy, at, at, at, ids, token, at], ids.length);
  }

  /**
   * Runs a write that must match `expected` rows. In a pipelined transaction it is held back to
   * travel with COMMIT, and the server checks the count before it commits (a count other than
   * `expected` never commits): answered as `expected`. Otherwise it runs, and its count is answered.
   */
  async #expecting(conn: Connection, sql: string, values: unknown[], expected: number): Promise<number> {
    const pipeline = pipelineOf(conn);
    if (pipeline !== undefined) {
      pipeline.queue(sql, values);
      pipeline.queue(DB.expectRowCount, [expected]);
      return expected;
    }
    return (await conn.query<Result>(sql, values))[0].affectedRows;
  }

  /** Pending again or failed for good, while `lease` is held; answers whether it was. */
  async nack(conn: Connection, lease: HeldLease, failure: PullFailure, errorText: string, now: number): Promise<boolean> {
    const at = new Date(now);
    const retry = failure.retryAt !== null;
    const [result] = await conn.query<Result>(PULL_SQL.nack, [
      retry ? 'pending' : 'failed',
      retry ? new Date(failure.retryAt!) : null,
      retry ? null : at,
      errorText,
      at,
      lease.id,
      lease.token,
      at,
    ]);
    return result.affectedRows === 1;
  }

  /** The lease runs until `until`, while it is held; answers whether it was. */
  async extend(lease: HeldLease, until: number, now: number): Promise<boolean> {
    return autocommit(this.database, async (conn) => {
      const [result] = await conn.query<Result>(PULL_SQL.extend, [new Date(until), lease.id, lease.token, new Date(now)]);
      return result.affectedRows === 1;
    });
  }
}
