/**
 * The fleet's slots under the type limits (the punctual_limit_slots table): the database decides who may
 * start, so maxConcurrency and ratePerSecond hold for every process together. A slot is a row
 * (type, group, kind, slot number) held by `holder` until leased_until, in database time; a slot
 * whose lease passed is free, whoever held it. Taking is one conditional UPDATE of free rows; when
 * it got fewer than asked, the lowest slot numbers no row has yet (a few more than it wants) are
 * inserted free (INSERT IGNORE: a number two processes race for gets one row) and the UPDATE is
 * asked again. A row goes to one taker, and racing first takers share the inserted slots between
 * them instead of all aiming at the same lowest numbers.
 * Runner of dispatch/fleet-slots.ts.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';

export type SlotKind = 'run' | 'rate';

/** A group's slots of one kind: `size` of them, numbered 0 .. size - 1. */
export interface SlotGroup {
  type: string;
  /** '' for the whole type. */
  digest: string;
  kind: SlotKind;
}

/** A take that finds too few rows inserts at least this many missing slot numbers (see take). */
const FRESH_AT_LEAST = 8;

/** A lease that ended this long ago leaves its row to the sweep (a busy group keeps its rows). */
const SWEEP_AFTER_S = 3600;

const SQL = {
  /** Free slots of the group (lease passed) under `size`, lowest first: taken for the holder. */
  takeFree:
    'UPDATE punctual_limit_slots SET holder = ?, leased_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND ' +
    'WHERE type = ? AND group_digest = ? AND kind = ? AND slot < ? AND leased_until < UTC_TIMESTAMP(3) ORDER BY slot LIMIT ?',
  numbers: 'SELECT slot FROM punctual_limit_slots WHERE type = ? AND group_digest = ? AND kind = ?',
  insert: 'INSERT IGNORE INTO punctual_limit_slots (type, group_digest, kind, slot, holder, leased_until) VALUES ',
  held: 'SELECT slot FROM punctual_limit_slots WHERE type = ? AND group_digest = ? AND kind = ? AND holder = ? ORDER BY slot',
  free:
    "UPDATE punctual_limit_slots SET holder = '', leased_until = '1970-01-01 00:00:01' " +
    'WHERE type = ? AND group_digest = ? AND kind = ? AND slot IN (?) AND holder = ?',
  sweep: `DELETE FROM punctual_limit_slots WHERE leased_until < UTC_TIMESTAMP(3) - INTERVAL ${SWEEP_AFTER_S} SECOND LIMIT 1000`,
} as const;

export class LimitSlotStore {
  constructor(private readonly database: Database) {}

  /**
   * Takes up to `want` of the group's `size` slots for `holder` (unique to this take) for
   * `leaseMs`: the slot numbers it got, maybe fewer than asked, maybe none.
   */
  async take(group: SlotGroup, size: number, want: number, holder: string, leaseMs: number): Promise<number[]> {
    if (want <= 0) return [];
    const { type, digest, kind } = group;
    const micros = Math.round(leaseMs * 1000);
    return autocommit(this.database, async (conn) => {
      const [updated] = await conn.query<mysql.ResultSetHeader>(SQL.takeFree, [holder, micros, type, digest, kind, size, want]);
      if (updated.affectedRows < want) {
        const [rows] = await conn.query<[number][] & mysql.RowDataPacket[]>({ sql: SQL.numbers, rowsAsArray: true }, [type, digest, kind]);
        const present = new Set(rows.map(([slot]) => Number(slot)));
        // A few more missing numbers than wanted (a group's size may be a rate of 100,000): racing
        // takers insert the same ones free, then the conditional UPDATE decides who gets which.
        const fresh: number[] = [];
        const room = Math.max(want - updated.affectedRows, FRESH_AT_LEAST);
        for (let slot = 0; slot < size && fresh.length < room; slot++) if (!present.has(slot)) fresh.push(slot);
        if (fresh.length > 0) {
          const row = "(?, ?, ?, ?, '', '1970-01-01 00:00:01')";
          await conn.query(
            SQL.insert + fresh.map(() => row).join(', '),
            fresh.flatMap((slot) => [type, digest, kind, slot]),
          );
          await conn.query(SQL.takeFree, [holder, micros, type, digest, kind, size, want - updated.affectedRows]);
        }
      }
      const [held] = await conn.query<[number][] & mysql.RowDataPacket[]>({ sql: SQL.held, rowsAsArray: true }, [
        type,
        digest,
        kind,
        holder,
      ]);
      return held.map(([slot]) => Number(slot));
    });
  }

  /** Frees `slots` of the group that `holder` holds (a slot someone took over since is left alone). */
  async free(group: SlotGroup, slots: readonly number[], holder: string): Promise<void> {
    if (slots.length === 0) return;
    await autocommit(this.database, (conn) => conn.query(SQL.free, [group.type, group.digest, group.kind, [...slots], holder]));
  }

  /** Drops rows whose lease ended long ago (groups no longer used); a few at a time. */
  async sweep(): Promise<void> {
    await autocommit(this.database, (conn) => conn.query(SQL.sweep));
  }
}
