/**
 * The writes of a run, inside the caller's transaction (its `conn`): claim (lock the due tasks),
 * mark them running under a lease or done, record a failure (pending again at a retry time, or
 * failed), insert a recurring task's next occurrence, skip what misfired, and recover what an
 * expired lease left running. Every write is conditional on the state it expects (invariant 13)
 * and answers how many rows (or whether the row) it wrote; what a shortfall means is the
 * lifecycle's. The statements are sql/tasks.ts's.
 */
import type { Connection } from '../db/connection.js';
import { pipelineOf } from '../db/pipeline.js';
import { DB } from '../db/sql.js';
import { fromRow, type TaskRow } from './rows.js';
import { SQL } from './sql/tasks.js';
import type { Result } from './statements.js';
import { tagTuples } from './tags.js';
import { MAX_ERROR_LENGTH, type CallRecord, type ClaimedRun, type Failure, type LeasedRun, type Task, type Wait } from './task-types.js';

/** No task waited for its type. */
const NO_WAITS: ReadonlyMap<number, Wait> = new Map();
const NO_RESULTS: ReadonlyMap<number, string> = new Map();

/** markDone's and markRunning's values for the waits: (id, ms) pairs and (id, reason) pairs. */
function waitValues(waited: ReadonlyMap<number, Wait>): { pairs: unknown[]; reasons: unknown[] } {
  const entries = [...waited];
  return { pairs: entries.flatMap(([id, wait]) => [id, wait.ms]), reasons: entries.flatMap(([id, wait]) => [id, wait.reason]) };
}

/** An error as a task keeps it: MAX_ERROR_LENGTH characters at most. */
export function clip(error: string): string {
  return error.length > MAX_ERROR_LENGTH ? `${error.slice(0, MAX_ERROR_LENGTH - 1)}…` : error;
}

/** The columns' range: smallint unsigned for a status, int unsigned for the rest. */
function callValues(call: CallRecord): unknown[] {
  const bounded = (value: number | null, max: number) => (value === null ? null : Math.min(Math.max(0, Math.round(value)), max));
  return [bounded(call.httpStatus, 65_535), bounded(call.durationMs, 4_294_967_295), bounded(call.responseBytes, 4_294_967_295)];
}

export class RunWrites {
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
      task.traceParent,
      task.traceState,
    ]);
    // The series keeps its tags, so a bulk change by tag reaches its next occurrence too.
    if (task.tags.length > 0) await conn.query(SQL.insertTags(tagTuples(result.insertId, task.tags), true));
    return result.insertId;
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
