/**
 * What happened to a run, told once: a log line and the run metrics. Both executors report here,
 * so a done, retried or failed run reads the same whichever path ran it. The dispatch metrics
 * (runs, lateness, handler time, retries, and the claims and database failures the dispatcher
 * counts) are registered here, on the registry the service hands over.
 */
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import { withoutRedaction } from '../observability/log.js';
import type { RunOf, RunSpan, Tracing } from '../observability/tracing.js';
import type { RecentRuns, RunOutcome } from '../observability/recent-runs.js';
import { resultOf } from '../lifecycle/history.js';
import { lateFrom, waitedMs } from '../store/rows.js';
import type { Failure, Task, Wait } from '../store/task-types.js';
import { printableJson } from '../util/printable.js';

/** Seconds, from 1 ms to 60 s. */
const LATENESS_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds, from 10 ms to an hour: a pause lasts minutes. */
const WAIT_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const DURATION_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class DispatchMetrics {
  readonly runs: Counter<'type' | 'outcome'>;
  readonly lateness: Histogram<'type'>;
  readonly wait: Histogram<'type' | 'reason'>;
  readonly duration: Histogram<'type'>;
  readonly retries: Counter<'type'>;
  readonly dispatchDbFailures: Counter;
  readonly emptyClaims: Counter;
  readonly fencedClaims: Counter;
  readonly expired: Counter<'type'>;

  /** `recent`: the dashboard's last hour of runs, fed with every run recorded here. */
  constructor(
    registry: Registry,
    private readonly recent?: RecentRuns,
  ) {
    const registers = [registry];
    this.runs = new Counter({
      name: 'punctual_task_runs_total',
      help: 'Task runs by type and outcome (done, retry: failed and will run again, failed: for good).',
      labelNames: ['type', 'outcome'] as const,
      registers,
    });
    this.lateness = new Histogram({
      name: 'punctual_task_lateness_seconds',
      help: "How late a run started, of what punctual controls: run start − runAt − the time it waited for its type's pause or limits (punctual_task_wait_seconds).",
      labelNames: ['type'] as const,
      buckets: LATENESS_BUCKETS,
      registers,
    });
    this.wait = new Histogram({
      name: 'punctual_task_wait_seconds',
      help: "How long a run that waited for its type's pause (reason pause) or limits (reason limit: maxConcurrency, ratePerSecond) waited before it started; not part of its lateness.",
      labelNames: ['type', 'reason'] as const,
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.duration = new Histogram({
      name: 'punctual_handler_duration_seconds',
      help: 'How long a handler ran (for a batch, its time divided among its tasks).',
      labelNames: ['type'] as const,
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.retries = new Counter({
      name: 'punctual_task_retries_total',
      help: 'Failed runs that will be tried again.',
      labelNames: ['type'] as const,
      registers,
    });
    this.dispatchDbFailures = new Counter({
      name: 'punctual_dispatch_db_failures_total',
      help: 'Database failures met while running a batch (a cut connection, a deadlock, a lock wait timeout): its tasks were put back on their timers and tried again, without using an attempt.',
      registers,
    });
    this.emptyClaims = new Counter({
      name: 'punctual_empty_claims_total',
      help: 'Claims that locked none of their fired tasks (another process ran them, or they were changed meanwhile).',
      registers,
    });
    this.fencedClaims = new Counter({
      name: 'punctual_fenced_claims_total',
      help: 'Fired tasks not claimed because this process could not prove it holds their shard.',
      registers,
    });
    this.expired = new Counter({
      name: 'punctual_tasks_expired_total',
      help: 'Tasks skipped unrun because they could not start within their expireAfterMs of runAt (an outage, a pause, a wall).',
      labelNames: ['type'] as const,
      registers,
    });
  }

  /** Records one run that started at `startedAt` for a task due at `runAt`, after `waited` for its type (not lateness). */
  recordRun(type: string, outcome: RunOutcome, runAt: number, startedAt: number, durationMs: number, waited?: Wait): void {
    const waitedMs = waited?.ms ?? 0;
    const lateMs = startedAt - runAt - waitedMs;
    this.runs.inc({ type, outcome });
    this.lateness.observe({ type }, Math.max(0, lateMs) / 1000);
    if (waited !== undefined && waitedMs > 0) this.wait.observe({ type, reason: waited.reason }, waitedMs / 1000);
    this.duration.observe({ type }, durationMs / 1000);
    if (outcome === 'retry') this.retries.inc({ type });
    this.recent?.record(outcome, lateMs, startedAt, waitedMs);
  }
}

/**
 * A key or an error as a log line carries it: pino escapes C0 itself, but a U+2028 or a NEL left
 * raw cuts the line in two for readers that break lines at them, and 8-bit CSI or a bidi
 * override acts on the terminal that shows it. Both come from callers (a key, a receiver's answer).
 */
const logged = (text: string | null): string | null => (text === null ? null : printableJson(text));

/**
 * A handler's answer as its run line carries it: a string alone (anything else is 'done', so an
 * object a handler returns never reaches a line written without redaction), cleaned and bounded
 * as the stored result is (resultOf), then escaped as keys and errors are.
 */
const loggedAnswer = (answer: unknown): string => printableJson(resultOf(answer) ?? 'done');

/** What a run's span needs of its task (attempt: the one this run is). */
export function runOf(task: Task): RunOf {
  return {
    id: task.id,
    key: task.key,
    type: task.type,
    attempt: task.attempts + 1,
    occurrence: task.seriesId !== null,
    trace: task.traceParent === null ? null : { traceParent: task.traceParent, traceState: task.traceState },
  };
}

export class Outcomes {
  /** The run lines: every field is one of these methods' own, none a secret, so none is redacted. */
  private readonly log: Logger;

  constructor(
    log: Logger,
    private readonly metrics: DispatchMetrics | undefined,
    /** SHARDING=on: whether a task was created here in a shard another process owns (its run line says so). */
    private readonly createdHere?: (id: number) => boolean,
    /** Runs' spans: an outside run brings its own; a database run's is made here, after its COMMIT. */
    private readonly tracing?: Tracing,
  ) {
    this.log = withoutRedaction(log);
  }

  /**
   * Ends the run's span: `span` (an outside run's, made when it began) or, for a database run,
   * one made now from its start and duration, with its transaction's work as a part of it.
   */
  #endSpan(span: RunSpan | undefined, task: Task, startedAt: number, durationMs: number, outcome: string, error?: string): void {
    if (span !== undefined) {
      span.end(outcome, error);
      return;
    }
    // Made after the fact, a span that is not recorded would carry the context to nothing.
    if (this.tracing?.recording !== true) return;
    const made = this.tracing.runSpan(runOf(task), startedAt, startedAt - lateFrom(task) - waitedMs(task));
    if (made === undefined) return;
    made.part(`${task.type} transaction`, { 'db.system.name': 'mysql', 'punctual.task.type': task.type }, startedAt, startedAt + durationMs);
    made.end(outcome, error, startedAt + durationMs);
  }

  /** `startedAt` is when the run began (its lateness is measured from runAt to it, less its wait for its type); `answer` is its handler's. */
  done(task: Task, startedAt: number, durationMs: number, answer: unknown, span?: RunSpan): void {
    this.log.info(
      {
        taskId: task.id,
        type: task.type,
        key: logged(task.key),
        startedAt,
        lateMs: startedAt - lateFrom(task) - waitedMs(task),
        ...(task.waited === undefined ? {} : { waitedMs: task.waited.ms, waitReason: task.waited.reason }),
        durationMs,
        outcome: loggedAnswer(answer),
        ...(this.createdHere?.(task.id) === true ? { createdHere: true } : {}),
      },
      'task done',
    );
    this.metrics?.recordRun(task.type, 'done', task.runAt, startedAt, durationMs, task.waited);
    this.#endSpan(span, task, startedAt, durationMs, 'done');
  }

  failed(task: Task, failure: Failure, startedAt: number, durationMs: number, span?: RunSpan): void {
    this.log.warn(
      {
        taskId: task.id,
        type: task.type,
        key: logged(task.key),
        lateMs: startedAt - lateFrom(task) - waitedMs(task),
        ...(task.waited === undefined ? {} : { waitedMs: task.waited.ms, waitReason: task.waited.reason }),
        error: logged(failure.error),
        retryAt: failure.retryAt === null ? null : new Date(failure.retryAt).toISOString(),
      },
      failure.retryAt === null ? 'task failed' : 'task will be retried',
    );
    const outcome = failure.retryAt === null ? 'failed' : 'retry';
    this.metrics?.recordRun(task.type, outcome, task.runAt, startedAt, durationMs, task.waited);
    this.#endSpan(span, task, startedAt, durationMs, outcome, failure.error);
  }

  /** A task past its expireAfterMs, skipped unrun (committed). */
  expired(task: Task, now: number): void {
    this.log.warn(
      { taskId: task.id, type: task.type, key: logged(task.key), lateMs: now - task.requestedRunAt, expireAfterMs: task.expireAfterMs },
      'task expired: skipped, not run',
    );
    this.metrics?.expired.inc({ type: task.type });
  }

  /** An outside run whose lease was lost before its record: not counted, the new owner's run counts. */
  leaseLost(task: Task, span?: RunSpan): void {
    span?.end('lease lost');
    this.log.warn(
      { taskId: task.id, type: task.type, key: logged(task.key) },
      'task ran, but its lease was lost meanwhile: its result is not recorded here',
    );
  }
}
