/**
 * The run history: every run of a task, newest first (sql/task-runs.ts). A run that succeeded is on
 * record in its task's row (lateness, wait, result, finish and the process, which markDone,
 * completeLeased and an ack write with the status: done_by names the process), with no row of its
 * own: a firing writes no second copy of what its task's row says. A run that failed or was lost
 * has a row in punctual_task_runs, written on the caller's connection, in the transaction that
 * records its outcome on its task, a batch's runs in one statement: a run is on record exactly
 * when its outcome is. In a pipelined transaction that statement travels with COMMIT. Rows of done
 * runs a release before 0.2 wrote are read as they are (their tasks have no done_by).
 * Reads run on a connection of their own. See docs/architecture.md#run-history.
 */
import type mysql from 'mysql2/promise';
import type { Connection, Database } from '../db/connection.js';
import { pipelineOf } from '../db/pipeline.js';
import { autocommit } from '../db/transaction.js';
import { clip } from './run-writes.js';
import type { WaitReason } from './task-types.js';
import { TASK_RUNS } from './sql/task-runs.js';

/** How a run ended: done; failed and to be tried again; failed for good; lost (its lease ran out). */
export type RunOutcome = 'done' | 'retry' | 'failed' | 'lost';

/** One run of a task; times are epoch milliseconds. */
export interface TaskRun {
  /** Its row's id; null for a successful run, on record in its task's row. */
  id: number | null;
  taskId: number;
  attempt: number;
  outcome: RunOutcome;
  /** The run_at it was due at. */
  dueAt: number;
  startedAt: number;
  finishedAt: number;
  /** How long it waited for its type's pause or limits before it started. */
  waitedMs: number;
  /** What it waited for the longest; null when it did not wait. */
  waitReason: WaitReason | null;
  /** startedAt − dueAt − waitedMs: the start's lateness of what punctual controls. */
  latenessMs: number;
  durationMs: number;
  error: string | null;
  /** What the handler answered (resultOf in lifecycle/history.ts); null when it said nothing or failed. */
  result: string | null;
  httpStatus: number | null;
  /** The process that ran it. */
  process: string;
}

/** A run to record: everything but its id. */
export type NewRun = Omit<TaskRun, 'id'>;

function clipped(error: string | null): string | null {
  return error === null ? null : clip(error);
}

type RunRow = [
  number | null,
  number,
  number,
  RunOutcome,
  number,
  number,
  number,
  number,
  number,
  string | null,
  number | null,
  string,
  number,
  WaitReason | null,
  string | null,
];

function fromRow(row: RunRow): TaskRun {
  const [
    id,
    taskId,
    attempt,
    outcome,
    dueAt,
    startedAt,
    finishedAt,
    latenessMs,
    durationMs,
    error,
    httpStatus,
    process,
    waitedMs,
    waitReason,
    result,
  ] = row;
  return {
    id: id === null ? null : Number(id),
    taskId: Number(taskId),
    attempt: Number(attempt),
    outcome,
    dueAt: Number(dueAt),
    startedAt: Number(startedAt),
    finishedAt: Number(finishedAt),
    waitedMs: Number(waitedMs),
    waitReason,
    latenessMs: Number(latenessMs),
    durationMs: Number(durationMs),
    error,
    result,
    httpStatus: httpStatus === null ? null : Number(httpStatus),
    process,
  };
}

const MAX_DURATION_MS = 4_294_967_295;

/** The runs that finished in a window, from the table: every process's, and the same after a restart. */
export interface RunFigures {
  done: number;
  retries: number;
  failed: number;
  lost: number;
  /** Runs that waited for a pause or a limit before they started. */
  waited: number;
  latenessP50Ms: number | null;
  latenessP99Ms: number | null;
}

/** The rank of the `p` quantile among `n` sorted values (nearest rank). */
const rank = (p: number, n: number) => Math.max(0, Math.ceil(p * n) - 1);

export class RunHistory {
  constructor(private readonly database: Database) {}

  /**
   * Records `runs` (failed or lost: a successful run is on record in its task's row) in the
   * caller's transaction, in one statement. In a pipelined transaction
   * (db/pipeline.ts) the statement is held back to travel with COMMIT: no round trip of its own.
   */
  async record(conn: Connection, runs: readonly NewRun[]): Promise<void> {
    if (runs.length === 0) return;
    const values: unknown[] = [];
    for (const run of runs) {
      values.push(
        run.taskId,
        run.attempt,
        run.outcome,
        new Date(run.dueAt),
        new Date(run.startedAt),
        new Date(run.finishedAt),
        Math.round(run.latenessMs),
        Math.min(Math.max(0, Math.round(run.durationMs)), MAX_DURATION_MS),
        clipped(run.error),
        run.httpStatus === null ? null : Math.min(Math.max(0, Math.round(run.httpStatus)), 65_535),
        run.process.slice(0, 64),
        Math.min(Math.max(0, Math.round(run.waitedMs)), MAX_DURATION_MS),
        run.waitReason,
        run.result,
      );
    }
    const pipeline = pipelineOf(conn);
    if (pipeline !== undefined) pipeline.queue(TASK_RUNS.insert(runs.length), values);
    else await conn.query(TASK_RUNS.insert(runs.length), values);
  }

  /** Records the runs of the locked `ids` whose lease ran out before `before`, as lost at `now`; before their repair writes them. */
  async recordLost(conn: Connection, ids: readonly number[], before: number, now: number): Promise<number> {
    if (ids.length === 0) return 0;
    const [result] = await conn.query<mysql.ResultSetHeader>(TASK_RUNS.insertLost, [new Date(now), ids, new Date(before)]);
    return result.affectedRows;
  }

  /** The runs that finished at or after `since`, counted from the table (every process's). */
  async finishedSince(since: number): Promise<RunFigures> {
    return autocommit(this.database, async (conn) => {
      const at = new Date(since);
      const [rows] = await conn.query<[string, number, number | null][] & mysql.RowDataPacket[]>(
        { sql: TASK_RUNS.finishedSince, rowsAsArray: true },
        [at],
      );
      const [[done]] = await conn.query<[number, number | null][] & mysql.RowDataPacket[]>(
        { sql: TASK_RUNS.doneSince, rowsAsArray: true },
        [at],
      );
      const of = (outcome: RunOutcome) => Number(rows.find(([name]) => name === outcome)?.[1] ?? 0);
      const figures: RunFigures = {
        done: of('done') + Number(done?.[0] ?? 0),
        retries: of('retry'),
        failed: of('failed'),
        lost: of('lost'),
        waited: rows.reduce((sum, [, , waited]) => sum + Number(waited ?? 0), Number(done?.[1] ?? 0)),
        latenessP50Ms: null,
        latenessP99Ms: null,
      };
      const started = figures.done + figures.retries + figures.failed;
      if (started > 0) {
        const at50 = rank(0.5, started);
        const at99 = rank(0.99, started);
        const read = async (offset: number) => {
          const [found] = await conn.query<[number][] & mysql.RowDataPacket[]>({ sql: TASK_RUNS.latenessAtRank, rowsAsArray: true }, [
            at,
            at,
            offset,
          ]);
          return found[0] === undefined ? null : Number(found[0][0]);
        };
        figures.latenessP50Ms = await read(at50);
        figures.latenessP99Ms = await read(at99);
      }
      return figures;
    });
  }

  /**
   * A task's runs, newest first, those before run id `before` (a previous page's last). Its
   * successful run, read from its row, is its latest: on the first page only.
   */
  async ofTask(taskId: number, limit: number, before?: number): Promise<TaskRun[]> {
    return autocommit(this.database, async (conn) => {
      const runs: RunRow[] = [];
      if (before === undefined) {
        const [done] = await conn.query<RunRow[] & mysql.RowDataPacket[]>({ sql: TASK_RUNS.doneOfTask, rowsAsArray: true }, [taskId]);
        runs.push(...done);
      }
      if (runs.length < limit) {
        const [rows] = await conn.query<RunRow[] & mysql.RowDataPacket[]>({ sql: TASK_RUNS.ofTask, rowsAsArray: true }, [
          taskId,
          before ?? Number.MAX_SAFE_INTEGER,
          limit - runs.length,
        ]);
        runs.push(...rows);
      }
      return runs.map(fromRow);
    });
  }
}
