/**
 * What happened to a run, told once: a log line and the run metrics. Both executors report here,
 * so a done, retried or failed run reads the same whichever path ran it.
 */
import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics.js';
import type { Failure, Task } from '../store/task-store.js';

export class Outcomes {
  constructor(
    private readonly log: Logger,
    private readonly metrics: Metrics | undefined,
  ) {}

  /** `startedAt` is when the run began (its lateness is measured from runAt to it). */
  done(task: Task, startedAt: number, durationMs: number, outcome: string): void {
    this.log.info(
      { taskId: task.id, type: task.type, key: task.key, startedAt, lateMs: startedAt - task.runAt, durationMs, outcome },
      'task done',
    );
    this.metrics?.recordRun(task.type, 'done', task.runAt, startedAt, durationMs);
  }

  failed(task: Task, failure: Failure, startedAt: number, durationMs: number): void {
    this.log.warn(
      {
        taskId: task.id,
        type: task.type,
        key: task.key,
        lateMs: startedAt - task.runAt,
        error: failure.error,
        retryAt: failure.retryAt === null ? null : new Date(failure.retryAt).toISOString(),
      },
      failure.retryAt === null ? 'task failed' : 'task will be retried',
    );
    this.metrics?.recordRun(task.type, failure.retryAt === null ? 'failed' : 'retry', task.runAt, startedAt, durationMs);
  }

  /** An outside run whose lease was lost before its record: not counted, the new owner's run counts. */
  leaseLost(task: Task): void {
    this.log.warn(
      { taskId: task.id, type: task.type, key: task.key },
      'task ran, but its lease was lost meanwhile: its result is not recorded here',
    );
  }
}
