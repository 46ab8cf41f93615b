/**
 * What a task is to the service, and the shapes the store's statements take and answer, with no
 * code but the reserved keys' test: a module that only names a task imports this, not the store's classes. Times are epoch
 * milliseconds. The rows they are read from: rows.ts; the statements: sql/tasks.ts.
 */
import type { MisfirePolicy, TaskStatus } from '../contract/limits.js';

/** A task as the service sees it; times are epoch milliseconds. */
export interface Task {
  id: number;
  key: string | null;
  type: string;
  payload: unknown;
  status: TaskStatus;
  runAt: number;
  /**
   * The instant the shop asked for: runAt as created, rescheduled or retried, never moved by a
   * retry's backoff (what a repeated create is compared with); runAt on a row inserted straight.
   */
  requestedRunAt: number;
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
  /** Tags given at create (see tags.ts), in their order. */
  tags: string[];
  /** How late the latest run started (start − runAt, ms); null before a run. */
  latenessMs: number | null;
  /** The latest outside run's HTTP status, duration (ms) and response size (bytes). */
  lastHttpStatus: number | null;
  lastDurationMs: number | null;
  lastResponseBytes: number | null;
  /** What the latest successful run's handler answered (history.ts resultOf); null when it said nothing. */
  lastResult?: string | null;
  /** Among tasks due now or overdue, a higher one is claimed first. */
  priority: number;
  /** No attempt starts later than this many ms after requestedRunAt: it is skipped as expired. */
  expireAfterMs: number | null;
  /** Its group under limits with `groupBy: "group"`. */
  group: string | null;
  /** The W3C trace context of its create (`traceparent`, `tracestate`): each run's span continues it. */
  traceParent: string | null;
  traceState: string | null;
  /**
   * Not stored on the task: how long this run waited in this process for its type's pause or
   * limits before it was admitted (set by the dispatcher's plan on the runs it admits).
   */
  waited?: Wait;
}

/** What a waiting room held a run back for: `pause`, or `limit` (maxConcurrency, ratePerSecond). */
export type WaitReason = 'pause' | 'limit';

/** How long a run waited for its type, and for what the longest. */
export interface Wait {
  ms: number;
  reason: WaitReason;
}

export interface NewTask {
  key: string | null;
  type: string;
  payload: unknown;
  /** `payload` as JSON, when the create wrote it already (to check its size); written as is. */
  payloadJson?: string;
  runAt: number;
  timezone: string;
  maxAttempts: number;
  misfire: MisfirePolicy;
  cron: string | null;
  /** At most MAX_TAGS tags (see tags.ts); none when left out. */
  tags?: string[];
  /** 0 when left out. */
  priority?: number;
  /** The ceiling of replaces (maxDelayMs after the first runAt); none when left out. */
  latestRunAt?: number | null;
  /** None when left out. */
  expireAfterMs?: number | null;
  /** None when left out. */
  group?: string | null;
  /** The create's trace context (observability/tracing.ts); none when left out. */
  traceParent?: string | null;
  traceState?: string | null;
}

/** What a timer needs: the id and the time. The rest is read when the task fires. */
export interface TimerEntry {
  id: number;
  runAt: number;
  /** 0 when left out: the order in which due tasks are handed to the dispatcher. */
  priority?: number;
  /** A worker type's task: it gets no timer, the pull hub watches when it falls due. */
  untimed?: true;
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

/**
 * The keys punctual owns: its failure notices' (NOTIFY_URL). No create may take one, and no change
 * through the API (edit, move, cancel, delete, retry, a bulk change) may touch their tasks.
 */
export const RESERVED_KEY_PREFIX = 'punctual:notify:';

/** Whether `key` is one punctual owns (RESERVED_KEY_PREFIX). */
export function isReservedKey(key: string | null): boolean {
  return key !== null && key.startsWith(RESERVED_KEY_PREFIX);
}

/**
 * The instants a task's times may take, in UTC: from the epoch to the last minute `run_minute` (a
 * signed INT of minutes since the epoch, generated from run_at) holds, in 6053. Past them a row is
 * refused, and a filter is no error the database reports (`'10000-01-01 …'` compares as text).
 */
export const EARLIEST_INSTANT_MS = 0;
export const LATEST_INSTANT_MS = (2 ** 31 - 1) * 60_000 + 59_999;

/** How much of a run's error a task keeps (its lastError, a run row's error, a nack's). */
export const MAX_ERROR_LENGTH = 2000;

/** A status a task finishes in. */
export type FinishedStatus = 'done' | 'cancelled' | 'skipped' | 'failed';

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

/** Which tasks a bulk change selects: by a tag, a key prefix, a type, or a list of ids. */
/** Which tasks a bulk change picks; `all` is every task in the status (a retry or delete of finished ones only: the routes say). */
export type Selector = { tag: string } | { keyPrefix: string } | { type: string } | { ids: number[] } | { all: true };

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

/** A row's place in a list by status (a keyset page's edge): its run_at and id, and a finished one's finished_at. */
export interface ListKey {
  runAt: number;
  id: number;
  finishedAt?: number;
}

/** A create's answer: the task written, or the one its key already named. */
export type InsertResult = { created: true; task: Task } | { created: false; task: Task };
