/** Which ids go together in the next batch, and from which line: slot-waiting outside tasks first, then the released, then the due queue. */
import { describe, expect, it } from 'vitest';
import { nextBatch, type PumpState } from '../../src/dispatch/pump-plan.js';

const state = (fields: Omit<Partial<PumpState>, 'waiting'> & { waiting?: Partial<PumpState['waiting']> }): PumpState => ({
  concurrency: 4,
  batchSize: 10,
  batches: 0,
  outsideBusy: 0,
  ...fields,
  waiting: { 'outside-waiting': 0, released: 0, due: 0, ...fields.waiting },
});

describe('the next batch', () => {
  it('starts none at CONCURRENCY batches, or with nothing waiting', () => {
    expect(nextBatch(state({ batches: 4, waiting: { due: 5 } }))).toBeUndefined();
    expect(nextBatch(state({}))).toBeUndefined();
  });

  it('takes outside tasks waiting for a slot first, no more than the free slots', () => {
    expect(nextBatch(state({ outsideBusy: 1, waiting: { 'outside-waiting': 8, released: 3, due: 9 } }))).toEqual({
      line: 'outside-waiting',
      size: 3,
    });
  });

  it('passes over them while no outside slot is free', () => {
    expect(nextBatch(state({ outsideBusy: 4, waiting: { 'outside-waiting': 8, released: 3, due: 9 } }))).toEqual({
      line: 'released',
      size: 3,
    });
    expect(nextBatch(state({ outsideBusy: 4, waiting: { 'outside-waiting': 8, due: 9 } }))).toEqual({ line: 'due', size: 9 });
  });

  it('takes released tasks before the due queue, each within the batch size', () => {
    expect(nextBatch(state({ waiting: { released: 25, due: 9 } }))).toEqual({ line: 'released', size: 10 });
    expect(nextBatch(state({ waiting: { due: 25 } }))).toEqual({ line: 'due', size: 10 });
    expect(nextBatch(state({ batchSize: 2, waiting: { 'outside-waiting': 5 } }))).toEqual({ line: 'outside-waiting', size: 2 });
  });

  it('starts one batch beyond CONCURRENCY for due tasks of a priority above every batch in flight, and no second', () => {
    expect(nextBatch(state({ batches: 4, overtaking: 25, waiting: { due: 90 } }))).toEqual({ line: 'due', size: 10, overtakes: true });
    expect(nextBatch(state({ batches: 4, overtaking: 3, waiting: { due: 90 } }))).toEqual({ line: 'due', size: 3, overtakes: true });
    expect(nextBatch(state({ batches: 5, overtaking: 3, waiting: { due: 90 } }))).toBeUndefined();
    expect(nextBatch(state({ batches: 4, overtaking: 0, waiting: { due: 90 } }))).toBeUndefined();
  });
});
