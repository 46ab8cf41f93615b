/**
 * What a task handler is. A handler declares its payload schema and its effect:
 *
 * - `database`: it writes to the database, and runs inside the transaction that marks its task
 *   done. Its writes and the completion commit together or not at all: effect once.
 * - `outside`: it touches the world outside the database (an HTTP call). It runs after the task
 *   is claimed with a lease; if the process dies mid-call the lease runs out and the task runs
 *   again, so it is at-least-once and must send a stable idempotency key.
 * - `worker`: punctual never runs it. A pull worker, the shop's own process, leases the due task
 *   (`POST /workers/lease`) and settles it (ack, nack); an expired lease puts it back, so it is
 *   at-least-once like an outside handler, with the same stable idempotency key.
 */
import type { Logger } from 'pino';
import type { Static, TSchema } from 'typebox';
import type { Connection, Db } from '../db/connection.js';
import type { Task } from '../store/task-types.js';
import type { RunTrace } from '../observability/tracing.js';

interface BaseContext<P> {
  task: Task;
  payload: P;
  log: Logger;
  /** The wall clock when the run started (epoch ms). */
  now: number;
}

export interface DatabaseContext<P> extends BaseContext<P> {
  /** drizzle on the completion transaction. */
  tx: Db;
  /** The same transaction's raw connection. */
  conn: Connection;
  /**
   * When given: holds a write whose answer the handler does not need, to travel with the task's
   * completion and COMMIT in one round trip (db/pipeline.ts). Deferred writes run in the order
   * deferred, before any statement sent after them on this connection; an error in one fails the
   * run as a thrown error would. Absent: send the write on `conn` yourself.
   */
  defer?: (sql: string, values?: unknown[]) => void;
}

/** What an outside call answered, kept on the task (lastHttpStatus, lastResponseBytes). */
export interface CallAnswer {
  /** The HTTP status; 0 when no answer came (a network error, a timeout). */
  httpStatus: number;
  /** The size of the answer's body as read (bounded by the handler); null when none came. */
  responseBytes: number | null;
}

export interface OutsideContext<P> extends BaseContext<P> {
  /** Aborted when the handler's time is up or punctual is stopping. */
  signal: AbortSignal;
  /** 1 on the first run, 2 on the first retry… */
  attempt: number;
  /** Tells what the call answered, before returning or throwing; stored with the run's result. */
  answered: (answer: CallAnswer) => void;
  /**
   * The run's trace, when it has one (observability/tracing.ts): each call the handler makes takes
   * its `outgoing` span's headers (`traceparent`, `tracestate`) and ends it with the answer.
   */
  trace?: RunTrace;
}

interface BaseHandler<S extends TSchema> {
  /** The task `type` that selects this handler. */
  type: string;
  /** Validates `payload` when a task is created, and again before it runs. */
  payload: S;
  /** A handler still running after this long is failed (and retried). */
  timeoutMs: number;
  /** A check the schema cannot express; returns a message for the caller when the payload is refused. */
  check?(payload: Static<S>): string | undefined;
}

export interface DatabaseBatchContext<P> {
  tx: Db;
  conn: Connection;
  /**
   * When given: holds a write whose answer the handler does not need, to travel with the task's
   * completion and COMMIT in one round trip (db/pipeline.ts). Deferred writes run in the order
   * deferred, before any statement sent after them on this connection; an error in one fails the
   * run as a thrown error would. Absent: send the write on `conn` yourself.
   */
  defer?: (sql: string, values?: unknown[]) => void;
  /** Tasks of this handler's type due together, in runAt order (then id). */
  tasks: { task: Task; payload: P }[];
  log: Logger;
  now: number;
}

export interface DatabaseHandler<S extends TSchema = TSchema> extends BaseHandler<S> {
  effect: 'database';
  /** Returns a short word for the log (e.g. "closed", "already paid"). */
  run(ctx: DatabaseContext<Static<S>>): Promise<string | void>;
  /**
   * Optional: runs many due tasks in one go (fewer statements, locks taken in one fixed order).
   * Answers one outcome per task, in order. If it throws, the tasks run again one by one through
   * run(), each with its own savepoint, so only the faulty one fails.
   */
  runBatch?(ctx: DatabaseBatchContext<Static<S>>): Promise<(string | void)[]>;
  /**
   * Optional: before COMMIT the handler only reads and locks, and every write it makes goes
   * through `defer` whenever `defer` is offered, so the writes travel with COMMIT. Its batch may
   * then start up to LOCK_AHEAD_MS before `runAt` (its `now` is `runAt` all the same) and waits
   * for `runAt` only to commit. A handler without it starts at `runAt`, never before.
   */
  locksAhead?: boolean;
}

export interface OutsideHandler<S extends TSchema = TSchema> extends BaseHandler<S> {
  effect: 'outside';
  run(ctx: OutsideContext<Static<S>>): Promise<string | void>;
}

/** A type whose tasks only pull workers run: no code here, only the payload's schema. */
export interface WorkerHandler<S extends TSchema = TSchema> extends BaseHandler<S> {
  effect: 'worker';
}

export type TaskHandler = DatabaseHandler | OutsideHandler | WorkerHandler;

/** The effects a handler may declare: the one list a handler module is checked against. */
export const HANDLER_EFFECTS = ['database', 'outside', 'worker'] as const satisfies readonly TaskHandler['effect'][];

/** An error a retry cannot fix (a malformed order, a refused URL): the task fails at once. */
export class PermanentError extends Error {
  override name = 'PermanentError';
}
