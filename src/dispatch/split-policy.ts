/**
 * What to do with a batch whose transaction failed, by the kind of error (error-kind.ts) and how
 * many tasks it held, once the dispatcher's whole-batch retries of lock conflicts are used up.
 * handler: a savepoint per task; overran: that task failed alone, the rest run again; lock-conflict
 * or row-failure of several: one task per batch; lock-conflict of one: looked at again shortly, no
 * attempt used; lost-connection, or row-failure of one: back on the timers with a growing delay.
 * See docs/architecture.md#when-a-batch-fails.
 */
import type { BatchError, HandlerOverran } from './error-kind.js';

export type BatchStep =
  | { step: 'rerun-carefully'; threw?: { taskId: number; error: unknown } }
  | { step: 'fail-overran'; overran: HandlerOverran }
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
      return { step: 'fail-overran', overran: failed.error };
    case 'lock-conflict':
      return tasks > 1 ? { step: 'split' } : { step: 'recheck' };
    case 'row-failure':
      return tasks > 1 ? { step: 'split' } : { step: 'back-off' };
    case 'lost-connection':
      return { step: 'back-off' };
  }
}
