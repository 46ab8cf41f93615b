/**
 * What becomes of each task a batch has locked, decided before anything runs, in (runAt, id) order:
 * failed as unrunnable, deferred (no free outside slot: not leased), skipped (waited past the
 * misfire grace), expired (not started within its expireAfterMs), held (its type's pause or
 * limits), leased (outside, to run after COMMIT), failed again (its handler threw in an earlier
 * try), runnable (database, grouped by its handler), or pulled (a worker type's: not claimed here,
 * handed to the waiting pull workers after COMMIT). Pure
 * but for the two questions it asks the type limits (`waited`, `admit`).
 * See docs/architecture.md#a-batchs-plan.
 */
import type { DatabaseHandler, OutsideHandler, TaskHandler } from '../handlers/handler.js';
import type { Failed } from '../lifecycle/run.js';
import { unrunnable } from '../lifecycle/run.js';
import type { Failure, Task } from '../store/task-types.js';
import type { Ticket } from './limits.js';

export interface PlanInputs {
  /** The time the batch's runs are said to start. */
  now: number;
  /** Free outside slots this batch may lease. */
  slots: number;
  misfireGraceMs: number;
  /** Errors of handlers that threw in an earlier try of this batch, by task id. */
  threw: ReadonlyMap<number, unknown>;
  handlers: { get(type: string): TaskHandler | undefined; payloadProblem(type: string, payload: unknown): string | undefined };
  limits: { waited(id: number): boolean; admit(task: Task, now: number): Ticket | undefined };
  failureOf(task: Task, attemptsUsed: number, error: unknown, now: number): Failure;
}

export interface BatchPlan {
  failures: Failed[];
  leased: { task: Task; handler: OutsideHandler }[];
  deferred: Task[];
  skipped: Task[];
  /** Past their expireAfterMs: skipped as expired, never run. */
  expired: Task[];
  held: Task[];
  runnable: Map<DatabaseHandler, Task[]>;
  /** Due tasks of worker types: left pending, for a pull worker to lease (pull-hub.ts). */
  pulled: Task[];
  /** The runs admitted by the type limits, by task id (the leased and the runnable). */
  tickets: Map<number, Ticket>;
}

export function planBatch(locked: readonly Task[], inputs: PlanInputs): BatchPlan {
  const { now, slots, misfireGraceMs, threw, handlers, limits } = inputs;
  const plan: BatchPlan = {
    failures: [],
    leased: [],
    deferred: [],
    skipped: [],
    expired: [],
    held: [],
    runnable: new Map(),
    pulled: [],
    tickets: new Map(),
  };
  for (const task of [...locked].sort((a, b) => a.runAt - b.runAt || a.id - b.id)) {
    const handler = handlers.get(task.type);
    const problem = handlers.payloadProblem(task.type, task.payload);
    if (handler === undefined || problem !== undefined) {
      plan.failures.push(unrunnable(task, handler === undefined ? `no handler for type ${JSON.stringify(task.type)}` : problem!));
      continue;
    }
    if (task.expireAfterMs !== null && now > task.requestedRunAt + task.expireAfterMs) {
      plan.expired.push(task); // whatever held it (an outage, a pause, a full slot), it is too late now
      continue;
    }
    if (handler.effect === 'worker') {
      plan.pulled.push(task); // a pull worker leases it; its type's pause and limits are asked there
      continue;
    }
    if (handler.effect === 'outside' && plan.leased.length >= slots) {
      plan.deferred.push(task); // no slot: it waits for one before it asks its type
      continue;
    }
    if (limits.waited(task.id) && task.misfire === 'skip' && task.runAt < now - misfireGraceMs) {
      plan.skipped.push(task);
      continue;
    }
    const ticket = limits.admit(task, now);
    if (ticket === undefined) {
      plan.held.push(task);
      continue;
    }
    plan.tickets.set(task.id, ticket);
    // What it waited for its type travels with the run: its wait, apart from its lateness.
    const run = ticket.waited === undefined ? task : { ...task, waited: ticket.waited };
    if (handler.effect === 'outside') {
      plan.leased.push({ task: run, handler });
    } else if (threw.has(task.id)) {
      plan.failures.push({ task: run, failure: inputs.failureOf(run, run.attempts + 1, threw.get(task.id), now) });
    } else {
      plan.runnable.set(handler, [...(plan.runnable.get(handler) ?? []), run]);
    }
  }
  return plan;
}
