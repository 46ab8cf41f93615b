/**
 * What a committed batch leaves to do, decided from its result alone:
 *
 * - the ids the dispatcher is done with, released from the due queue: every id of the batch but
 *   the leased (busy until their call ends), the deferred (waiting for an outside slot) and the
 *   held (waiting for their type). Fired ids that were not locked are done with too: the recheck
 *   looks at them from the table;
 * - the admitted runs that are over at COMMIT (the database ones), whose slots under the type
 *   limits free up; a leased run's slot frees when its call ends;
 * - each reported run's share of the batch's time (a batch runs its tasks together).
 */
import type { BatchResult } from './batch-try.js';
import type { Ticket } from './limits.js';

export interface Settlement {
  finished: number[];
  over: Ticket[];
  shareMs: number;
}

export function settlementOf(result: BatchResult, batch: readonly number[], elapsedMs: number): Settlement {
  const leased = new Set(result.leased.map(({ task }) => task.id));
  const kept = new Set([...leased, ...result.deferred.map((task) => task.id), ...result.held.map((task) => task.id)]);
  const reported = result.done.length + result.failures.length;
  return {
    finished: batch.filter((id) => !kept.has(id)),
    over: [...result.tickets].filter(([id]) => !leased.has(id)).map(([, ticket]) => ticket),
    shareMs: Math.round((elapsedMs / Math.max(1, reported)) * 100) / 100,
  };
}
