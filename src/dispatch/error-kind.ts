/**
 * What kind of error stopped a batch, or a handler: the dispatcher acts on the kind, never on the
 * error's details (split-policy.ts decides what to do with a batch of each kind).
 *
 * - lost-connection: the database went away; the outcome is unknown and nothing was the tasks' fault.
 * - lock-conflict: a deadlock or a lock-wait timeout; rolled back, safe to try again, nobody's fault.
 * - handler / permanent: a handler threw (permanent: a PermanentError, which no retry can fix). The
 *   task's own failure: its attempt counts.
 * - overran: a handler ran past its time; its connection was killed and took the transaction along.
 * - row-failure: a statement failed for a reason of its rows (a shop's trigger, a constraint): one
 *   task's row, but which one the batch cannot tell.
 *
 * A lost connection is checked first: a connection killed mid-lock-wait reports both.
 */
import { isConnectionError, isLockConflict } from '../db/errors.js';
import { PermanentError } from '../handlers/handler.js';
import { TimeoutError } from '../util/async.js';
import type { Task } from '../store/task-store.js';

/** A handler threw in the fast path: roll back, and run the batch again with savepoints. */
export class HandlerThrew extends Error {
  /** `taskId` is undefined when a whole-batch call threw. */
  constructor(
    readonly taskId: number | undefined,
    readonly error: unknown,
  ) {
    super('a handler threw');
  }
}

/** A handler overran its time; its connection was killed. */
export class HandlerOverran extends Error {
  constructor(
    readonly task: Task,
    timeoutMs: number,
  ) {
    super(`handler timed out after ${timeoutMs} ms`);
  }
}

/** What a handler's own error is. */
export type HandlerErrorKind = 'lost-connection' | 'lock-conflict' | 'overran' | 'permanent' | 'handler';

export function handlerErrorKind(error: unknown): HandlerErrorKind {
  if (error instanceof TimeoutError) return 'overran';
  if (isConnectionError(error)) return 'lost-connection';
  if (isLockConflict(error)) return 'lock-conflict';
  if (error instanceof PermanentError) return 'permanent';
  return 'handler';
}

/** What stopped a batch's transaction, with what the dispatcher needs of it. */
export type BatchError =
  | { kind: 'handler'; error: HandlerThrew }
  | { kind: 'overran'; error: HandlerOverran }
  | { kind: 'lost-connection' | 'lock-conflict' | 'row-failure' };

export type BatchErrorKind = BatchError['kind'];

export function batchErrorOf(error: unknown): BatchError {
  if (error instanceof HandlerThrew) return { kind: 'handler', error };
  if (error instanceof HandlerOverran) return { kind: 'overran', error };
  if (isConnectionError(error)) return { kind: 'lost-connection' };
  if (isLockConflict(error)) return { kind: 'lock-conflict' };
  return { kind: 'row-failure' };
}
