/** What becomes of a batch whose transaction failed, by the kind of error and the batch's size. */
import { describe, expect, it } from 'vitest';
import { HandlerOverran, HandlerThrew } from '../../src/dispatch/error-kind.js';
import { nextStep } from '../../src/dispatch/split-policy.js';
import { aTask } from '../helpers/tasks.js';

describe('the split policy', () => {
  it('runs a batch again carefully after a handler threw, keeping which task threw when known', () => {
    const boom = new Error('boom');
    expect(nextStep({ kind: 'handler', error: new HandlerThrew(4, boom) }, 5)).toEqual({
      step: 'rerun-carefully',
      threw: { taskId: 4, error: boom },
    });
    expect(nextStep({ kind: 'handler', error: new HandlerThrew(undefined, boom) }, 5)).toEqual({ step: 'rerun-carefully' });
  });

  it('fails an overrunning task on its own, whatever the size', () => {
    const overran = new HandlerOverran(aTask({ id: 9 }), 300);
    for (const size of [1, 5]) expect(nextStep({ kind: 'overran', error: overran }, size)).toEqual({ step: 'fail-overran', overran });
  });

  it('splits a batch of several after a lock conflict or a row-level failure', () => {
    expect(nextStep({ kind: 'lock-conflict' }, 2)).toEqual({ step: 'split' });
    expect(nextStep({ kind: 'row-failure' }, 20)).toEqual({ step: 'split' });
  });

  it('looks again shortly at one task locked elsewhere; backs off one whose row fails', () => {
    expect(nextStep({ kind: 'lock-conflict' }, 1)).toEqual({ step: 'recheck' });
    expect(nextStep({ kind: 'row-failure' }, 1)).toEqual({ step: 'back-off' });
  });

  it('backs off the whole batch when the connection was lost, never splitting it', () => {
    for (const size of [1, 20]) expect(nextStep({ kind: 'lost-connection' }, size)).toEqual({ step: 'back-off' });
  });
});
