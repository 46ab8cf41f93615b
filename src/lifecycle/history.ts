/**
 * What a run leaves on record (src/store/run-history.ts): the run rows of the run transitions,
 * built from the task as its claim locked it and the times of the run. Each transition that
 * records an outcome hands its rows to the recorder on its own connection, so the rows commit with
 * the outcome or not at all. See docs/architecture.md#run-history.
 */
import type { Connection } from '../db/connection.js';
import type { NewRun, RunHistory, RunOutcome } from '../store/run-history.js';
import type { Failure, Task } from '../store/task-store.js';

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
    dueAt: task.runAt,
    startedAt: times.startedAt,
    finishedAt: times.finishedAt,
    latenessMs: times.startedAt - task.runAt,
    durationMs: times.durationMs ?? Math.max(0, times.finishedAt - times.startedAt),
    error,
    httpStatus: times.httpStatus ?? null,
    process: recorder.process,
  };
}

/** Writes `runs` on `conn` when history is on. */
export async function recordRuns(recorder: RunRecorder | undefined, conn: Connection, runs: readonly NewRun[]): Promise<void> {
  if (recorder !== undefined && runs.length > 0) await recorder.history.record(conn, runs);
}
