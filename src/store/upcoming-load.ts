/**
 * Upcoming load: pending tasks due per minute of the next hour and per hour of the next 7 days, by
 * type (the dashboard's charts), and the overdue count (/metrics, capped at OVERDUE_CAP). One
 * grouped statement over the `(type, status, run_minute, run_at)` index (the types with pending
 * tasks first, one look into it each) reads no row, but still grows with
 * the tasks in the window, so the count is kept and served stale while a new one runs (one at a
 * time, at most every CACHE_MS): a dashboard never waits for it.
 * See docs/architecture.md#upcoming-load.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { autocommit } from '../db/transaction.js';
import { SQL } from './sql/tasks.js';

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const MINUTES = 60;
export const HOURS = 7 * 24;
export const CACHE_MS = 5000;
export const OVERDUE_CAP = 1_000_000;

/** Counts per bucket, by type. `start` is the first bucket's start (epoch ms). */
export interface Buckets {
  start: number;
  stepMs: number;
  byType: Record<string, number[]>;
}

export interface UpcomingLoadCounts {
  /** When it was counted (epoch ms), and how long that took. */
  at: number;
  countMs: number;
  /** Pending tasks due before the current minute (at most OVERDUE_CAP). */
  overdue: number;
  minutes: Buckets;
  hours: Buckets;
}

function zeros(n: number): number[] {
  return new Array<number>(n).fill(0);
}

export class UpcomingLoad {
  #last: UpcomingLoadCounts | undefined;
  #counting: Promise<UpcomingLoadCounts> | undefined;

  constructor(
    private readonly database: Database,
    private readonly cacheMs = CACHE_MS,
  ) {}

  /**
   * The latest counts; a new count starts when they are `cacheMs` old. Only the very first
   * call waits for a count.
   */
  read(now: number): Promise<UpcomingLoadCounts> {
    const last = this.#last;
    const stale = last === undefined || now - last.at >= this.cacheMs || now < last.at;
    if (stale && this.#counting === undefined) {
      const counting = this.count(now).then((counts) => (this.#last = counts));
      this.#counting = counting;
      // A failed count is not kept; the next read tries again.
      counting.then(
        () => (this.#counting = undefined),
        () => (this.#counting = undefined),
      );
    }
    return last === undefined ? this.#counting! : Promise.resolve(last);
  }

  /** Pending tasks due before `before` (epoch ms), up to `cap`: a count over the index alone. */
  async countDueBefore(before: number, cap = OVERDUE_CAP): Promise<number> {
    const [rows] = await autocommit(this.database, (conn) =>
      conn.query<({ n: number | string } & mysql.RowDataPacket)[]>(SQL.countDueBefore, [new Date(before), cap]),
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** One count, uncached. */
  async count(now: number): Promise<UpcomingLoadCounts> {
    const started = performance.now();
    const m0 = Math.floor(now / MINUTE_MS) * MINUTE_MS;
    const h0 = Math.floor(now / HOUR_MS) * HOUR_MS;
    const minutesEnd = m0 + MINUTES * MINUTE_MS;
    const hoursEnd = h0 + HOURS * HOUR_MS;
    const rows = await autocommit(this.database, async (conn) => {
      const [types] = await conn.query<[string][] & mysql.RowDataPacket[]>({ sql: SQL.pendingTypes, rowsAsArray: true });
      if (types.length === 0) return [];
      const [counts] = await conn.query<mysql.RowDataPacket[][]>({ sql: SQL.upcomingLoad, rowsAsArray: true }, [
        types.map(([type]) => type),
        m0 / MINUTE_MS,
        hoursEnd / MINUTE_MS,
      ]);
      return counts;
    });
    const overdue = await this.countDueBefore(m0);
    // Maps, not objects, while counting: a type is any text a row holds (a shop may insert rows
    // itself), and `byType["__proto__"][i] += n` on a plain object wrote into Object.prototype.
    const hours = new Map<string, number[]>();
    const minutes = new Map<string, number[]>();
    const row = (map: Map<string, number[]>, type: string, length: number): number[] => {
      let counts = map.get(type);
      if (counts === undefined) map.set(type, (counts = zeros(length)));
      return counts;
    };
    for (const [minute, type, count] of rows as unknown as [number, string, number | string][]) {
      const at = Number(minute) * MINUTE_MS;
      const n = Number(count);
      row(hours, type, HOURS)[Math.floor((at - h0) / HOUR_MS)]! += n;
      if (at < minutesEnd) row(minutes, type, MINUTES)[(at - m0) / MINUTE_MS] = n;
    }
    // A type due only later still gets its (empty) row in the minute chart: the same series in both.
    for (const type of hours.keys()) row(minutes, type, MINUTES);
    const counts: UpcomingLoadCounts = {
      at: now,
      countMs: 0,
      overdue,
      // fromEntries defines each key as the object's own, "__proto__" too.
      minutes: { start: m0, stepMs: MINUTE_MS, byType: Object.fromEntries(minutes) },
      hours: { start: h0, stepMs: HOUR_MS, byType: Object.fromEntries(hours) },
    };
    counts.countMs = Math.round(performance.now() - started);
    return counts;
  }
}
