/**
 * What kind of error stopped a batch, or a handler: the dispatcher acts on the kind, never on the
 * error's details (split-policy.ts decides what to do with a batch of each kind): lost-connection,
 * lock-conflict, handler / permanent (the task's own failure: its attempt counts), overran,
 * row-failure. A lost connection is checked first: a connection killed mid-lock-wait reports both.
 * See docs/architecture.md#when-a-batch-fails.
 */
import { isConnectionError, isLockConflict, refusedByServer } from '../db/errors.js';
import { PermanentError } from '../handlers/handler.js';
import { TimeoutError } from '../util/async.js';
import type { Task } from '../store/task-types.js';

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

/**
 * `mode`: the try that failed. The server refusing a statement of a fast try (an unknown column,
 * data too long) may be a handler's write that travelled with the COMMIT (db/pipeline.ts): the
 * careful try runs each handler's writes in its own savepoint, where the task that made it fails
 * alone, with its attempt counted. Refused again there, it is punctual's own statement.
 */
export function batchErrorOf(error: unknown, mode: 'fast' | 'careful' = 'careful'): BatchError {
  if (error instanceof HandlerThrew) return { kind: 'handler', error };
  if (mode === 'fast' && refusedByServer(error)) return { kind: 'handler', error: new HandlerThrew(undefined, error) };
  if (error instanceof HandlerOverran) return { kind: 'overran', error };
  if (isConnectionError(error)) return { kind: 'lost-connection' };
  if (isLockConflict(error)) return { kind: 'lock-conflict' };
  return { kind: 'row-failure' };
}
