/** What a committed batch leaves to do: which ids leave the queue, which runs are over, each run's share of the time. */
import { describe, expect, it } from 'vitest';
import type { BatchResult } from '../../src/dispatch/batch-try.js';
import type { Ticket } from '../../src/dispatch/limits.js';
import { settlementOf } from '../../src/dispatch/settlement.js';
import type { OutsideHandler } from '../../src/handlers/handler.js';
import { aTask } from '../helpers/tasks.js';

const ticket = (id: number): Ticket => ({ type: 'alpha', key: `alpha-${id}`, startedAt: 0 });
const hook = { type: 'hook', effect: 'outside' } as OutsideHandler;

function result(fields: Partial<BatchResult>): BatchResult {
  return {
    locked: [],
    done: [],
    failures: [],
    leased: [],
    deferred: [],
    skipped: [],
    expired: [],
    held: [],
    pulled: [],
    tickets: new Map(),
    later: [],
    at: 0,
    ...fields,
  };
}

describe('the settlement of a batch', () => {
  it('keeps busy the leased, deferred and held ids, and releases the rest, locked or not', () => {
    const settled = settlementOf(
      result({
        done: [{ task: aTask({ id: 1 }), outcome: 'done' }],
        leased: [{ task: aTask({ id: 2 }), handler: hook }],
        deferred: [aTask({ id: 3 })],
        held: [aTask({ id: 4 })],
        skipped: [aTask({ id: 5 })],
      }),
      [1, 2, 3, 4, 5, 6],
      0,
    );
    expect(settled.finished).toEqual([1, 5, 6]);
  });

  it('frees the type-limit slots of the database runs at COMMIT, not those of the leased ones', () => {
    const settled = settlementOf(
      result({ leased: [{ task: aTask({ id: 2 }), handler: hook }], tickets: new Map([1, 2, 3].map((id) => [id, ticket(id)])) }),
      [1, 2, 3],
      0,
    );
    expect(settled.over).toEqual([ticket(1), ticket(3)]);
  });

  it("shares the batch's time among the runs it reports, to a hundredth of a millisecond", () => {
    const done = [1, 2, 3].map((id) => ({ task: aTask({ id }), outcome: 'done' }));
    expect(settlementOf(result({ done }), [1, 2, 3], 10).shareMs).toBe(3.33);
    expect(settlementOf(result({}), [1], 10).shareMs).toBe(10);
  });
});
