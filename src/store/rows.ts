/**
 * The row model: what a task is to the service, and how a row of `tasks` read by hand becomes
 * one. Times are epoch milliseconds computed by the server (whatever its time_zone), so reading
 * them never depends on the process's or the server's zone.
 */
import type mysql from 'mysql2/promise';
import type { MisfirePolicy, TaskStatus } from '../contract/limits.js';
import { decodeJson } from '../util/json.js';
import { datetimeLiteral, sqlLiteral } from '../db/connection.js';
import type { NewTask, Task, TimerEntry } from './task-types.js';

/** The ms `task`'s run waited for its type (0: it did not). */
export function waitedMs(task: Pick<Task, 'waited'>): number {
  return task.waited?.ms ?? 0;
}

/**
 * The instant a run's lateness counts from: its runAt, or the create or move that set it when that
 * came later (a task created or moved into the past was not late before anyone asked for it).
 */
export function lateFrom(task: Pick<Task, 'runAt' | 'createdAt'>): number {
  return Math.max(task.runAt, task.createdAt);
}

/** lateFrom in SQL, of the table aliased `t` ('' for none). Moves set created_at's later twin, run_at, to at least their own time. */
export const lateFromSql = (t = '') => `GREATEST(${t}run_at, ${t}created_at)`;

/** A DATETIME(3) column as epoch milliseconds, computed by the server, whatever its time_zone. */
export const ms = (column: string) => `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${column}) DIV 1000`;

/** The run_minute of the instant `?`, as the generated column computes it from run_at. */
const MINUTE_OF = "TIMESTAMPDIFF(MINUTE, '1970-01-01 00:00:00', ?)";

/**
 * `run_at <op> ?` written for an index with (…, run_minute, run_at): as a range on both columns,
 * which the index seeks and stops on exactly (run_minute never decreases with run_at, so the pair
 * compares as run_at alone), on MySQL and MariaDB both. `run_minute <op> M(?)` alone would take in
 * all of M's minute; `(run_minute, run_at) <op> (M(?), ?)` reads the type's whole range on
 * MariaDB; `run_minute <op> M(?) AND run_at <op> ?` is exact on MariaDB, but MySQL's range
 * optimizer uses no key part after one with a range. Its instant is three placeholders: `runAtValues`.
 */
export const runAtRange = (op: '<' | '<=' | '>' | '>=') =>
  `(run_minute ${op[0]} ${MINUTE_OF} OR run_minute = ${MINUTE_OF} AND run_at ${op} ?)`;

/** `run_at = ?` written for the same indexes: the minute too, so the index seeks to it. Its values: `runAtIsValues`. */
export const runAtIs = `run_minute = ${MINUTE_OF} AND run_at = ?`;

/** The values of one runAtIs. */
export const runAtIsValues = (at: Date) => [at, at];

/** The values of one runAtRange. */
export const runAtValues = (at: Date) => [at, at, at];

/** The columns of a whole task, in the order fromRow reads them. */
export const TASK_COLUMNS = [
  'id',
  'task_key',
  'type',
  'payload',
  `${ms('run_at')} AS run_at`,
  `${ms('COALESCE(requested_run_at, run_at)')} AS requested_run_at`,
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
  'tags',
  'lateness_ms',
  'last_http_status',
  'last_duration_ms',
  'last_response_bytes',
  'last_result',
  'priority',
  'expire_after_ms',
  'group_key',
  'trace_parent',
  'trace_state',
].join(', ');

export interface TaskRow extends mysql.RowDataPacket {
  id: number;
  task_key: string | null;
  type: string;
  payload: unknown;
  run_at: number;
  requested_run_at: number;
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
  tags: unknown;
  lateness_ms: number | null;
  last_http_status: number | null;
  last_duration_ms: number | null;
  last_response_bytes: number | null;
  last_result: string | null;
  priority: number;
  expire_after_ms: number | null;
  group_key: string | null;
  trace_parent: string | null;
  trace_state: string | null;
}

const orNull = (value: number | null) => (value === null ? null : Number(value));

export function fromRow(row: TaskRow): Task {
  return {
    id: Number(row.id),
    key: row.task_key,
    type: row.type,
    payload: decodeJson(row.payload),
    status: row.status,
    runAt: Number(row.run_at),
    requestedRunAt: Number(row.requested_run_at),
    timezone: row.timezone,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    misfire: row.misfire,
    leaseOwner: row.lease_owner,
    leaseUntil: orNull(row.lease_until),
    lastError: row.last_error,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    finishedAt: orNull(row.finished_at),
    cron: row.cron,
    seriesId: orNull(row.series_id),
    tags: row.tags === null ? [] : (decodeJson(row.tags) as string[]),
    latenessMs: orNull(row.lateness_ms),
    lastHttpStatus: orNull(row.last_http_status),
    lastDurationMs: orNull(row.last_duration_ms),
    lastResponseBytes: orNull(row.last_response_bytes),
    lastResult: row.last_result,
    priority: Number(row.priority),
    expireAfterMs: orNull(row.expire_after_ms),
    group: row.group_key,
    traceParent: row.trace_parent,
    traceState: row.trace_state,
  };
}

/**
 * A task just inserted, as the insert wrote it (no second read). Field by field, not `...task`:
 * a spread followed by a field it already has (tags) takes V8's slow path, some 50 µs a task.
 */
export function created(task: NewTask, id: number, now: number): Task {
  return {
    key: task.key,
    type: task.type,
    payload: task.payload,
    runAt: task.runAt,
    requestedRunAt: task.runAt,
    timezone: task.timezone,
    maxAttempts: task.maxAttempts,
    misfire: task.misfire,
    cron: task.cron,
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
    tags: task.tags ?? [],
    latenessMs: null,
    lastHttpStatus: null,
    lastDurationMs: null,
    lastResponseBytes: null,
    priority: task.priority ?? 0,
    expireAfterMs: task.expireAfterMs ?? null,
    group: task.group ?? null,
    traceParent: task.traceParent ?? null,
    traceState: task.traceState ?? null,
  };
}

/**
 * Rows of SQL.insertRows as SQL text, in its column order, each value escaped as mysql2 escapes a
 * placeholder's: a batch's 16,000 values are not gathered into an array for mysql2 to find their
 * placeholders in a statement of 16,000. A batch's rows mostly share their type, their zone,
 * attempts, misfire and cron, and the columns after the tags (the create's instant, priority,
 * latest, expiry, group): one writer escapes each such run of columns once for the rows that
 * share it, not once a row (a fifth less CPU for a batch's text, and a text of fewer pieces for
 * V8 to join).
 */
export class TupleWriter {
  #type: string | undefined;
  #typeText = '';
  // The columns between runAt and the tags, as the last row had them, and their text.
  #timezone: string | undefined;
  #maxAttempts = 0;
  #misfire: MisfirePolicy | undefined;
  #cron: string | null = null;
  #middleText = '';
  // The columns after the tags, as the last row had them, and their text.
  #at: string | undefined;
  #priority = 0;
  #latestRunAt: number | null = null;
  #expireAfterMs: number | null = null;
  #group: string | null = null;
  #traceParent: string | null = null;
  #traceState: string | null = null;
  #tailText = '';

  /** `task`'s row; `at`: the create's instant as datetimeLiteral(now), made once for a batch's rows. */
  tuple(task: NewTask, at: string): string {
    if (task.type !== this.#type) [this.#type, this.#typeText] = [task.type, sqlLiteral(task.type)];
    const { timezone, maxAttempts, misfire, cron } = task;
    if (timezone !== this.#timezone || maxAttempts !== this.#maxAttempts || misfire !== this.#misfire || cron !== this.#cron) {
      [this.#timezone, this.#maxAttempts, this.#misfire, this.#cron] = [timezone, maxAttempts, misfire, cron];
      this.#middleText = `${sqlLiteral(timezone)}, ${sqlLiteral(maxAttempts)}, ${sqlLiteral(misfire)}, ${sqlLiteral(cron)}, `;
    }
    const priority = task.priority ?? 0;
    const latestRunAt = task.latestRunAt ?? null;
    const expireAfterMs = task.expireAfterMs ?? null;
    const group = task.group ?? null;
    const traceParent = task.traceParent ?? null;
    const traceState = task.traceState ?? null;
    if (
      at !== this.#at ||
      priority !== this.#priority ||
      latestRunAt !== this.#latestRunAt ||
      expireAfterMs !== this.#expireAfterMs ||
      group !== this.#group ||
      traceParent !== this.#traceParent ||
      traceState !== this.#traceState
    ) {
      [this.#at, this.#priority, this.#latestRunAt, this.#expireAfterMs, this.#group] = [at, priority, latestRunAt, expireAfterMs, group];
      [this.#traceParent, this.#traceState] = [traceParent, traceState];
      const latest = latestRunAt === null ? 'NULL' : datetimeLiteral(latestRunAt);
      this.#tailText = `, ${at}, ${at}, ${sqlLiteral(priority)}, ${latest}, ${sqlLiteral(expireAfterMs)}, ${sqlLiteral(group)}, ${sqlLiteral(traceParent)}, ${sqlLiteral(traceState)})`;
    }
    const runAt = datetimeLiteral(task.runAt);
    const tags = task.tags === undefined || task.tags.length === 0 ? 'NULL' : sqlLiteral(JSON.stringify(task.tags));
    const payload = sqlLiteral(task.payloadJson ?? JSON.stringify(task.payload));
    return `(${sqlLiteral(task.key)}, ${this.#typeText}, ${payload}, ${runAt}, ${runAt}, ${this.#middleText}${tags}${this.#tailText}`;
  }
}

/** One row of SQL.insertRows as SQL text (TupleWriter's, for a row alone). */
export function insertTuple(task: NewTask, at: string): string {
  return new TupleWriter().tuple(task, at);
}

/** Rows of [id, runAt ms] (a timer's worth) as entries. */
export function toEntries(rows: [number, number, number?][]): TimerEntry[] {
  return rows.map(([id, runAt, priority]) => ({ id: Number(id), runAt: Number(runAt), priority: Number(priority ?? 0) }));
}
