/**
 * The outside executor: runs an outside handler for a task the batch leased, outside any
 * transaction, then records the result and the run's call (CallRecord) through the lifecycle,
 * conditional on the lease (invariant 13). The record is tried until it is written or the process
 * stops (invariant 4: at least once); one that finds the lease gone writes and counts nothing.
 * See docs/architecture.md#the-executors.
 */
import type { Logger } from 'pino';
import type { Clock } from '../time/clock.js';
import { loggable } from '../db/errors.js';
import type { RepeatedWarnings } from '../observability/repeated-warnings.js';
import { untilStopped } from '../db/retry.js';
import type { CallAnswer, OutsideHandler } from '../handlers/handler.js';
import type { Lifecycle } from '../lifecycle/lifecycle.js';
import { resultOf } from '../lifecycle/history.js';
import type { CallRecord, Failure, Task } from '../store/task-types.js';
import { withTimeout } from '../util/async.js';
import { runOf, type Outcomes } from './outcomes.js';
import type { Tracing } from '../observability/tracing.js';
import { lateFrom, waitedMs } from '../store/rows.js';

/** A lease outlives the handler's timeout by this much, so a live process never loses one. */
export const LEASE_MARGIN_MS = 30_000;

export const RECORD_FAILED = 'dispatcher: could not record a result, trying again';

export class OutsideExecutor {
  constructor(
    private readonly lifecycle: Lifecycle,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** Where a failed record's retries warn: summarised, a database outage makes one a second. */
    private readonly warnings: RepeatedWarnings,
    private readonly outcomes: Outcomes,
    /** This process's name in lease_owner. */
    private readonly owner: string,
    /** Aborted when stopping ran out of time: handlers are cut and records no longer retried. */
    private readonly abort: AbortSignal,
    /** Runs' spans: begun before the call, so the call carries the trace on. */
    private readonly tracing?: Tracing,
  ) {}

  /** Runs `task` (leased at `claimedAt`, its attempt counted) and records the result. Never throws. */
  async run(task: Task, handler: OutsideHandler, claimedAt: number): Promise<void> {
    const { clock, lifecycle, owner } = this;
    const attempt = task.attempts + 1;
    const started = clock.now();
    // A duration on the monotonic clock: a step of the wall clock mid-call does not distort it.
    const startedMono = performance.now();
    const signal = AbortSignal.any([AbortSignal.timeout(handler.timeoutMs), this.abort]);
    const span = this.tracing?.runSpan(runOf(task), claimedAt, claimedAt - lateFrom(task) - waitedMs(task));
    let answer: CallAnswer | undefined;
    let settled = false;
    const answered = (told: CallAnswer) => {
      // What the handler tells after its time ran out is not this run's record any more.
      if (!settled) answer = { ...told };
    };
    let outcome: string | void = undefined;
    let failure: Failure | undefined;
    try {
      outcome = await withTimeout(
        handler.run({
          task: { ...task, attempts: attempt },
          payload: task.payload,
          log: this.log,
          now: started,
          signal,
          attempt,
          answered,
          trace: span,
        }),
        handler.timeoutMs,
      );
    } catch (error) {
      failure = lifecycle.failureOf(task, attempt, error, clock.now());
    }
    settled = true;
    const call: CallRecord = {
      httpStatus: answer?.httpStatus ?? null,
      durationMs: Math.round(performance.now() - startedMono),
      responseBytes: answer?.responseBytes ?? null,
      result: failure === undefined ? resultOf(outcome) : null,
    };
    const persist = untilStopped(this.abort, (error, _round, delay) =>
      this.warnings.warn(RECORD_FAILED, { err: loggable(error), retryInMs: delay }, RECORD_FAILED),
    );
    try {
      // A record that wrote no row lost its lease: the task is another process's run now, and
      // counting it here too would count one run twice across the fleet.
      if (failure === undefined) {
        const { recorded } = await lifecycle.completeLeased(task, owner, persist, call);
        if (recorded) this.outcomes.done(task, claimedAt, clock.now() - started, outcome || 'done', span);
        else this.outcomes.leaseLost(task, span);
      } else {
        const { recorded } = await lifecycle.failLeased(task, failure, owner, persist, call, claimedAt);
        if (recorded) this.outcomes.failed(task, failure, claimedAt, clock.now() - started, span);
        else this.outcomes.leaseLost(task, span);
      }
    } catch {
      // Stopping with the database away: the lease will run out and the task runs again.
      span?.end('not recorded');
    }
  }
}
