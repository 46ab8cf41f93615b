/**
 * How the task store's rooms run a statement on a connection of its own: under the database's
 * deadline, again after a deadlock or lock-wait timeout (InnoDB rolled the statement back, so that
 * is safe), the transaction runner's autocommit (src/db/transaction.ts). Rows of tasks are mapped
 * by rows.ts.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { fromRow, type TaskRow } from './rows.js';
import type { RunAtCursor, Task } from './task-types.js';
import { runAtValues } from './rows.js';

export type Rows<T> = T & mysql.RowDataPacket[];
export type Result = mysql.ResultSetHeader;

export class Statements {
  constructor(private readonly database: Database) {}

  /** One statement on a connection of its own. */
  async query<T extends mysql.RowDataPacket[] | Result>(sql: string | mysql.QueryOptions, values: unknown[]): Promise<T> {
    const [result] = await autocommit(this.database, (conn) => conn.query<T>(sql as mysql.QueryOptions, values));
    return result;
  }

  /** Its rows as arrays of column values (no objects built for them). */
  arrays<T>(sql: string, values: unknown[]): Promise<T[]> {
    return this.query<Rows<T[]>>({ sql, rowsAsArray: true }, values);
  }

  async tasks(sql: string, values: unknown[]): Promise<Task[]> {
    return (await this.query<TaskRow[]>(sql, values)).map(fromRow);
  }
}

/** A LIKE pattern for "starts with": `!` escapes the prefix's own wildcards. */
export function prefixPattern(prefix: string): string {
  return `${prefix.replace(/[!%_]/g, '!$&')}%`;
}

export function cursorValues(cursor: RunAtCursor | undefined): unknown[] {
  return cursor === undefined ? [] : [new Date(cursor.runAt), new Date(cursor.runAt), cursor.id];
}

/** The values of AFTER_TYPED_CURSOR (sql/tasks.ts): the instant also as a range on (run_minute, run_at). */
export function typedCursorValues(cursor: RunAtCursor | undefined): unknown[] {
  return cursor === undefined ? [] : [...runAtValues(new Date(cursor.runAt)), ...cursorValues(cursor).slice(1)];
}
