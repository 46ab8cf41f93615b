/**
 * Worker types: task types punctual never runs itself, only leases to pull workers (the shop's own
 * processes, `POST /workers/lease`). A type is declared by WORKER_TYPES (any JSON object is its
 * payload) or by a handler module with `effect: 'worker'` and a payload schema; both come through
 * `workerType`, so the registry sees one kind of entry. See docs/workers.md.
 */
import { Type, type TSchema } from 'typebox';
import type { WorkerHandler } from './handler.js';

/** Any JSON object: what a WORKER_TYPES type takes as its payload. */
export const ANY_OBJECT = Type.Object({}, { additionalProperties: true });

export interface WorkerTypeDeclaration<S extends TSchema = TSchema> {
  type: string;
  /** The payload's schema, checked at create and again before a lease; default any JSON object. */
  payload?: S;
}

/** The registry's entry for a worker type. */
export function workerType<S extends TSchema>(declaration: WorkerTypeDeclaration<S>): WorkerHandler {
  return {
    type: declaration.type,
    effect: 'worker',
    payload: declaration.payload ?? ANY_OBJECT,
    // Not run here: the lease a worker asks for is its time limit.
    timeoutMs: 0,
  };
}
