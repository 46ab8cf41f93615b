/**
 * What a run leaves on record (src/store/run-history.ts): the run rows of the run transitions,
 * built from the task as its claim locked it and the times of the run. Each transition that
 * records an outcome hands its rows to the recorder on its own connection, so the rows commit with
 * the outcome or not at all. See docs/architecture.md#run-history.
 */
import { createHash } from 'node:crypto';
import type { Connection } from '../db/connection.js';
import type { NewRun, RunHistory, RunOutcome } from '../store/run-history.js';
import type { Failure, Task } from '../store/task-types.js';
import { lateFrom, waitedMs } from '../store/rows.js';

/** Where run rows go: the history and this process's name, or nowhere (RUN_HISTORY=off). */
export interface RunRecorder {
  history: RunHistory;
  /** This process, as it appears in lease_owner. */
  process: string;
}

/** When a run started and ended, how long its handler ran, what it answered. */
export interface RunTimes {
  startedAt: number;
  finishedAt: number;
  /** Null: finishedAt − startedAt. */
  durationMs?: number | null;
  httpStatus?: number | null;
  /** What the handler answered, as resultOf made it. */
  result?: string | null;
}

/** The longest answer of a handler kept on record (the columns' size). */
export const MAX_RESULT_LENGTH = 200;

/**
 * What a handler answered, as the record keeps it: text without control characters (a shop's
 * handler or a partner's answer may hold anything; a log line or a page must not be forged by
 * it), trimmed, cut to MAX_RESULT_LENGTH; null when it said nothing (or only "done").
 */
export function resultOf(answer: unknown): string | null {
  if (typeof answer !== 'string') return null;
  // eslint-disable-next-line no-control-regex
  const text = answer.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim();
  if (text === '' || text === 'done') return null;
  return text.length > MAX_RESULT_LENGTH ? `${text.slice(0, MAX_RESULT_LENGTH - 1)}…` : text;
}

/** The outcome a failure records: retried, or failed for good. */
export function failureOutcome(failure: Failure): RunOutcome {
  return failure.retryAt === null ? 'failed' : 'retry';
}

/** The run row of `task` (as its claim locked it: its attempt is one more). */
export function runOf(recorder: RunRecorder, task: Task, outcome: RunOutcome, error: string | null, times: RunTimes): NewRun {
  return {
    taskId: task.id,
    attempt: task.attempts + 1,
    outcome,
    dueAt: lateFrom(task),
    startedAt: times.startedAt,
    finishedAt: times.finishedAt,
    waitedMs: waitedMs(task),
    waitReason: task.waited?.reason ?? null,
    latenessMs: times.startedAt - lateFrom(task) - waitedMs(task),
    durationMs: times.durationMs ?? Math.max(0, times.finishedAt - times.startedAt),
    error,
    result: times.result ?? null,
    httpStatus: times.httpStatus ?? null,
    process: recorder.process,
  };
}

/**
 * The name a pull lease goes by in the run history: `pull:` and a digest of its token. The token
 * itself is what ack and nack must name, so a reader of the history must not learn it; the digest
 * still tells the runs of one lease apart from another's. The same as `PULL_HOLDER` in SQL.
 */
export function leaseHolder(token: string): string {
  return `pull:${createHash('sha256').update(token).digest('hex').slice(0, 12)}`;
}

/**
 * The run row of a pull lease settled at `now`: `task` as the settle locked or read it, its
 * attempt counted by the lease and its start (the lease) kept as its lateness.
 */
export function pullRunOf(task: Task, outcome: RunOutcome, error: string | null, token: string, now: number): NewRun {
  const startedAt = lateFrom(task) + (task.latenessMs ?? 0);
  return {
    taskId: task.id,
    attempt: task.attempts,
    outcome,
    dueAt: lateFrom(task),
    startedAt,
    finishedAt: now,
    waitedMs: 0,
    waitReason: null,
    latenessMs: startedAt - lateFrom(task),
    durationMs: Math.max(0, now - startedAt),
    error,
    result: null,
    httpStatus: null,
    process: leaseHolder(token),
  };
}

/** Writes `runs` on `conn` when history is on. */
export async function recordRuns(recorder: RunRecorder | undefined, conn: Connection, runs: readonly NewRun[]): Promise<void> {
  if (recorder !== undefined && runs.length > 0) await recorder.history.record(conn, runs);
}
