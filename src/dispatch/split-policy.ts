/**
 * What to do with a batch whose transaction failed, by the kind of error (error-kind.ts) and how
 * many tasks it held:
 *
 * - handler: run it again with a savepoint per task, so only the faulty task fails; the task that
 *   threw (when known) has its error recorded, and is not run a second time.
 * - overran: record the overrunning task's failure on its own, and run the rest again.
 * - lock-conflict or row-failure with several tasks: split it, one task per batch, so only the task
 *   it concerns waits, not every task batched with it.
 * - lock-conflict of one task: look at it again shortly; waiting for a lock someone else holds is
 *   not the task's failure, so no attempt is used.
 * - lost-connection, or row-failure of one task: back on the timers with a growing delay.
 *
 * Lock conflicts are first retried as a whole batch a few times (dispatcher.ts); this decides
 * what happens once those tries are used up.
 */
import type { BatchError, HandlerOverran } from './error-kind.js';

export type BatchStep =
  | { step: 'rerun-carefully'; threw?: { taskId: number; error: unknown } }
  | { step: 'fail-alone'; overran: HandlerOverran }
  | { step: 'split' }
  | { step: 'recheck' }
  | { step: 'back-off' };

export function nextStep(failed: BatchError, tasks: number): BatchStep {
  switch (failed.kind) {
    case 'handler': {
      const { taskId, error } = failed.error;
      return taskId === undefined ? { step: 'rerun-carefully' } : { step: 'rerun-carefully', threw: { taskId, error } };
    }
    case 'overran':
      return { step: 'fail-alone', overran: failed.error };
    case 'lock-conflict':
      return tasks > 1 ? { step: 'split' } : { step: 'recheck' };
    case 'row-failure':
      return tasks > 1 ? { step: 'split' } : { step: 'back-off' };
    case 'lost-connection':
      return { step: 'back-off' };
  }
}
