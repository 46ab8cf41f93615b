/**
 * The outside executor: runs an outside handler (`effect: 'outside'`, e.g. a webhook) for a task
 * the batch already claimed with a lease, outside any transaction, then records the result
 * through the lifecycle, conditional on the lease. The work is done by then and only its record
 * is missing, so the record is tried until it is written or the process stops; then the lease
 * runs out and the task runs again (at least once).
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { loggable } from '../db/errors.js';
import { untilStopped } from '../db/retry.js';
import type { OutsideHandler } from '../handlers/handler.js';
import type { Lifecycle } from '../lifecycle/lifecycle.js';
import type { Failure, Task } from '../store/task-store.js';
import { withTimeout } from '../util/async.js';
import type { Outcomes } from './outcomes.js';

/** A lease outlives the handler's timeout by this much, so a live process never loses one. */
export const LEASE_MARGIN_MS = 30_000;

export class OutsideExecutor {
  constructor(
    private readonly lifecycle: Lifecycle,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly outcomes: Outcomes,
    /** This process's name in lease_owner. */
    private readonly owner: string,
    /** Aborted when stopping ran out of time: handlers are cut and records no longer retried. */
    private readonly abort: AbortSignal,
  ) {}

  /** Runs `task` (leased at `claimedAt`, its attempt counted) and records the result. Never throws. */
  async run(task: Task, handler: OutsideHandler, claimedAt: number): Promise<void> {
    const { clock, lifecycle, owner } = this;
    const attempt = task.attempts + 1;
    const started = clock.now();
    const signal = AbortSignal.any([AbortSignal.timeout(handler.timeoutMs), this.abort]);
    let outcome: string | void = undefined;
    let failure: Failure | undefined;
    try {
      outcome = await withTimeout(
        handler.run({ task: { ...task, attempts: attempt }, payload: task.payload, log: this.log, now: started, signal, attempt }),
        handler.timeoutMs,
      );
    } catch (error) {
      failure = lifecycle.failureOf(task, attempt, error, clock.now());
    }
    const persist = untilStopped(this.abort, (error, _round, delay) =>
      this.log.warn({ err: loggable(error), retryInMs: delay }, 'dispatcher: could not record a result, trying again'),
    );
    try {
      if (failure === undefined) {
        const { recorded } = await lifecycle.completeLeased(task, owner, persist);
        if (!recorded) this.outcomes.leaseLost(task);
        this.outcomes.done(task, claimedAt, clock.now() - started, outcome || 'done');
      } else {
        await lifecycle.failLeased(task, failure, owner, persist);
        this.outcomes.failed(task, failure, claimedAt, clock.now() - started);
      }
    } catch {
      // Stopping with the database away: the lease will run out and the task runs again.
    }
  }
}
