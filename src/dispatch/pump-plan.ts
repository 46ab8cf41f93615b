/**
 * Which fired ids go together in the next batch, and from which line. Three lines wait, served
 * in this order while a batch may start (fewer than CONCURRENCY batches run):
 *
 * 1. outside tasks that found no free slot: they waited longest, and go first when outside slots
 *    are free, as many as there are free slots (within the batch size);
 * 2. tasks the type limits let through again (they were held back);
 * 3. the due queue: ids whose timers fired, in firing order.
 *
 * When CONCURRENCY batches run, one more may start for the due tasks of a priority above every
 * batch in flight (`overtaking`): a high task that comes due behind a wall of low ones waits for
 * its own batch, not for the wall's batches to end. One at a time, so at most CONCURRENCY + 1 run.
 *
 * Pure: the dispatcher asks again after each batch it starts, with the counts that batch changed.
 */

export type Line = 'outside-waiting' | 'released' | 'due';

export interface PumpState {
  concurrency: number;
  batchSize: number;
  /** Batches running now. */
  batches: number;
  /** Outside slots reserved or held now (outside-slots.ts). */
  outsideBusy: number;
  waiting: Readonly<Record<Line, number>>;
  /** Due tasks of a priority above every batch in flight (0 while an overtaking batch runs). */
  overtaking?: number;
}

export interface NextBatch {
  line: Line;
  size: number;
  /** Started beyond CONCURRENCY, for tasks of a priority above every batch in flight. */
  overtakes?: true;
}

/** The next batch to start, or undefined when none may start or nothing waits. */
export function nextBatch(state: PumpState): NextBatch | undefined {
  const { concurrency, batchSize, batches, outsideBusy, waiting, overtaking = 0 } = state;
  if (batches >= concurrency) {
    return batches === concurrency && overtaking > 0 ? { line: 'due', size: Math.min(batchSize, overtaking), overtakes: true } : undefined;
  }
  if (outsideBusy < concurrency && waiting['outside-waiting'] > 0) {
    return { line: 'outside-waiting', size: Math.min(batchSize, concurrency - outsideBusy, waiting['outside-waiting']) };
  }
  if (waiting.released > 0) return { line: 'released', size: Math.min(batchSize, waiting.released) };
  if (waiting.due > 0) return { line: 'due', size: Math.min(batchSize, waiting.due) };
  return undefined;
}
