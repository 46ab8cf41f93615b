/**
 * The stored pause and limits of each task type (the punctual_type_controls table): read at boot, after a
 * change and at each reconcile (dispatch/limits.ts applies them), written by the type routes. A
 * type without a row is not paused and has no limits. Statements: sql/type-controls.ts (and the
 * tasks catalogue's countDueOfType, one capped statement per type); each runs through the transaction runner.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit, transaction } from '../db/transaction.js';
import { runAtValues } from './rows.js';
import { SQL } from './sql/tasks.js';
import { TYPE_CONTROLS } from './sql/type-controls.js';

export interface TypeLimitsSetting {
  /** At most this many runs of the type (of one group) at once; null: no limit. */
  maxConcurrency: number | null;
  /** At most this many starts in any one second (of one group); null: no limit. */
  ratePerSecond: number | null;
  /** A payload field: the limits apply per value of it (per merchant, per host); null: per type. */
  groupBy: string | null;
}

export interface TypeControl extends TypeLimitsSetting {
  type: string;
  paused: boolean;
  updatedAt: number;
}

type ControlRow = [string, number, number | null, string | null, string | null, number];

function fromRow([type, paused, maxConcurrency, rate, groupBy, updatedAt]: ControlRow): TypeControl {
  return {
    type,
    paused: Number(paused) === 1,
    maxConcurrency: maxConcurrency === null ? null : Number(maxConcurrency),
    ratePerSecond: rate === null ? null : Number(rate),
    groupBy,
    updatedAt: Number(updatedAt),
  };
}

export const NO_LIMITS: TypeLimitsSetting = { maxConcurrency: null, ratePerSecond: null, groupBy: null };

export class TypeControlStore {
  constructor(private readonly database: Database) {}

  async list(): Promise<TypeControl[]> {
    return autocommit(this.database, async (conn) => {
      const [rows] = await conn.query<ControlRow[] & mysql.RowDataPacket[]>({ sql: TYPE_CONTROLS.all, rowsAsArray: true });
      return rows.map(fromRow);
    });
  }

  /** A digest of every stored setting: it moves with any change (sql/type-controls.ts, signature). */
  async signature(): Promise<string> {
    return autocommit(this.database, async (conn) => {
      const [rows] = await conn.query<[number, number][] & mysql.RowDataPacket[]>({ sql: TYPE_CONTROLS.signature, rowsAsArray: true });
      return `${rows[0]?.[0] ?? 0}:${rows[0]?.[1] ?? 0}`;
    });
  }

  /** Pending tasks of each of `types` due by `now`, each counted up to `cap`. */
  async countDueByType(types: readonly string[], now: number, cap: number): Promise<Map<string, number>> {
    return autocommit(this.database, async (conn) => {
      const counts = new Map<string, number>();
      for (const type of types) {
        const [rows] = await conn.query<[number][] & mysql.RowDataPacket[]>({ sql: SQL.countDueOfType, rowsAsArray: true }, [
          type,
          ...runAtValues(new Date(now)),
          cap,
        ]);
        counts.set(type, Number(rows[0]?.[0] ?? 0));
      }
      return counts;
    });
  }

  async setPaused(type: string, paused: boolean, now: number): Promise<void> {
    await autocommit(this.database, (conn) => conn.query(TYPE_CONTROLS.setPaused, [type, paused, new Date(now)]));
  }

  /** Applies `change` (a field left out is kept, null clears it) and answers the limits now stored. */
  async changeLimits(type: string, change: Partial<TypeLimitsSetting>, now: number): Promise<TypeLimitsSetting> {
    return transaction(this.database, async (conn) => {
      const [rows] = await conn.query<ControlRow[] & mysql.RowDataPacket[]>({ sql: TYPE_CONTROLS.lockOne, rowsAsArray: true }, [type]);
      const current = rows[0] === undefined ? NO_LIMITS : fromRow(rows[0]);
      const next: TypeLimitsSetting = {
        maxConcurrency: change.maxConcurrency === undefined ? current.maxConcurrency : change.maxConcurrency,
        ratePerSecond: change.ratePerSecond === undefined ? current.ratePerSecond : change.ratePerSecond,
        groupBy: change.groupBy === undefined ? current.groupBy : change.groupBy,
      };
      await conn.query(TYPE_CONTROLS.setLimits, [type, next.maxConcurrency, next.ratePerSecond, next.groupBy, new Date(now)]);
      return next;
    });
  }
}
