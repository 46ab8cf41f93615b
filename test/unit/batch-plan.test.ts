/**
 * What becomes of each task a batch has locked, with a real handler registry and real type
 * admission, and no database: which run in the transaction (grouped by handler), which are
 * leased, deferred for want of an outside slot, held by their type, skipped, or failed.
 */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { planBatch, type PlanInputs } from '../../src/dispatch/batch-plan.js';
import { TypeAdmission } from '../../src/dispatch/limits.js';
import type { OutsideHandler } from '../../src/handlers/handler.js';
import { HandlerRegistry } from '../../src/handlers/registry.js';
import type { Task } from '../../src/store/task-types.js';
import type { TypeControl } from '../../src/store/type-controls.js';
import { workerType } from '../../src/handlers/worker-type.js';
import { testHandler } from '../helpers/handlers.js';
import { aTask } from '../helpers/tasks.js';

const NOW = 1_000_000;
const mail = testHandler('mail', async () => undefined);
const sms = testHandler('sms', async () => undefined);
const hook: OutsideHandler = {
  type: 'hook',
  effect: 'outside',
  payload: Type.Object({ url: Type.String() }),
  timeoutMs: 1000,
  run: async () => undefined,
};
const registry = new HandlerRegistry()
  .register(mail)
  .register(sms)
  .register(hook)
  .register(workerType({ type: 'reset_membership' }));

function inputs(fields: Partial<PlanInputs> = {}, controls: TypeControl[] = []): PlanInputs {
  const limits = new TypeAdmission({ now: () => NOW });
  limits.apply(controls);
  return {
    now: NOW,
    slots: 10,
    misfireGraceMs: 1000,
    threw: new Map(),
    handlers: registry,
    limits,
    failureOf: (task, _used, error) => ({ id: task.id, error: String(error), retryAt: NOW + 100 }),
    ...fields,
  };
}

const ids = (tasks: { id: number }[] | { task: Task }[]) => tasks.map((entry) => ('task' in entry ? entry.task.id : entry.id));

describe('a batch plan', () => {
  it('hands the due tasks of worker types to the pull workers: not claimed, not admitted, even on a paused type', () => {
    const locked = [aTask({ id: 1, type: 'reset_membership', payload: { memberId: 1 } }), aTask({ id: 2, type: 'mail' })];
    const plan = planBatch(
      locked,
      inputs({}, [{ type: 'reset_membership', paused: true, maxConcurrency: null, ratePerSecond: null, groupBy: null, updatedAt: 0 }]),
    );
    expect(ids(plan.pulled)).toEqual([1]);
    expect(plan.tickets.has(1)).toBe(false);
    expect([...plan.held, ...plan.leased.map(({ task }) => task), ...plan.deferred].map((task) => task.id)).not.toContain(1);
    expect(ids([...plan.runnable.values()].flat())).toEqual([2]);
  });

  it('groups the database tasks by handler, in (runAt, id) order, and leases the outside ones', () => {
    const locked = [
      aTask({ id: 1, type: 'mail', runAt: 300 }),
      aTask({ id: 2, type: 'sms', runAt: 100 }),
      aTask({ id: 3, type: 'mail', runAt: 100 }),
      aTask({ id: 4, type: 'hook', payload: { url: 'x' }, runAt: 200 }),
    ];
    const plan = planBatch(locked, inputs());
    expect(ids(plan.runnable.get(mail)!)).toEqual([3, 1]);
    expect(ids(plan.runnable.get(sms)!)).toEqual([2]);
    expect(ids(plan.leased)).toEqual([4]);
    expect([...plan.tickets.keys()]).toEqual([2, 3, 4, 1]);
    expect([plan.failures, plan.deferred, plan.held, plan.skipped]).toEqual([[], [], [], []]);
  });

  it('fails, without running, a task of no handler or with a payload its handler refuses', () => {
    const plan = planBatch([aTask({ id: 1, type: 'nope' }), aTask({ id: 2, type: 'hook', payload: { url: 7 } })], inputs());
    expect(plan.failures.map(({ failure }) => failure)).toEqual([
      { id: 1, error: 'no handler for type "nope"', retryAt: null },
      { id: 2, error: expect.stringContaining('url'), retryAt: null },
    ]);
    expect(plan.tickets.size).toBe(0);
  });

  it('defers outside tasks beyond the free slots, before they ask their type', () => {
    const locked = [1, 2, 3].map((id) => aTask({ id, type: 'hook', payload: { url: 'x' }, runAt: id }));
    const plan = planBatch(locked, inputs({ slots: 1 }));
    expect(ids(plan.leased)).toEqual([1]);
    expect(ids(plan.deferred)).toEqual([2, 3]);
    expect([...plan.tickets.keys()]).toEqual([1]);
  });

  it('uses no outside slot for an outside task its type holds back', () => {
    const locked = [1, 2, 3].map((id) => aTask({ id, type: 'hook', payload: { url: 'x' }, runAt: id }));
    const limit = { type: 'hook', paused: false, maxConcurrency: 1, ratePerSecond: null, groupBy: null, updatedAt: 1 };
    const plan = planBatch(locked, inputs({ slots: 2 }, [limit]));
    expect(ids(plan.leased)).toEqual([1]);
    expect(ids(plan.held)).toEqual([2, 3]);
    expect(plan.deferred).toEqual([]);
  });

  it('holds back what its type refuses, and claims no slot for it', () => {
    const plan = planBatch(
      [aTask({ id: 1, type: 'mail' }), aTask({ id: 2, type: 'sms' })],
      inputs({}, [{ type: 'mail', paused: true, maxConcurrency: null, ratePerSecond: null, groupBy: null, updatedAt: 1 }]),
    );
    expect(ids(plan.held)).toEqual([1]);
    expect(plan.runnable.has(mail)).toBe(false);
    expect([...plan.tickets.keys()]).toEqual([2]);
  });

  it('skips a task that waited for its type past the misfire grace and asked to be skipped; not one that did not wait', () => {
    const limits = new TypeAdmission({ now: () => NOW });
    limits.apply([{ type: 'mail', paused: true, maxConcurrency: null, ratePerSecond: null, groupBy: null, updatedAt: 1 }]);
    const late = { type: 'mail', misfire: 'skip' as const, runAt: NOW - 5000 };
    limits.hold(aTask({ id: 1, ...late }));
    limits.apply([]);
    const plan = planBatch(
      [aTask({ id: 1, ...late }), aTask({ id: 2, ...late }), aTask({ id: 3, type: 'mail', runAt: NOW - 5000 })],
      inputs({ limits }),
    );
    expect(ids(plan.skipped)).toEqual([1]);
    expect(ids(plan.runnable.get(mail)!)).toEqual([2, 3]);
  });

  it('records the error of a handler that threw in an earlier try instead of running it again', () => {
    const boom = new Error('boom');
    const plan = planBatch([aTask({ id: 1, type: 'mail' }), aTask({ id: 2, type: 'mail' })], inputs({ threw: new Map([[1, boom]]) }));
    expect(plan.failures).toEqual([
      { task: expect.objectContaining({ id: 1 }), failure: { id: 1, error: 'Error: boom', retryAt: NOW + 100 } },
    ]);
    expect(ids(plan.runnable.get(mail)!)).toEqual([2]);
    expect(plan.tickets.has(1)).toBe(true);
  });
});
