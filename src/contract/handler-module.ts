/**
 * A handler module's contract: what a shop's own handler is, as plain objects, so a module needs
 * nothing installed to work. `HANDLERS=/path/a.mjs` loads a module whose default export is an
 * array of handlers; `createPunctual({ handlers })` takes the same objects. `defineHandler` only
 * adds types (it returns its argument). Imports only typebox's types, so the client package ships
 * it without the server. See docs/handlers.md.
 */
import type { Static, TSchema } from 'typebox';

/** A handler's task type: a lower-case letter, then letters, digits, `_`, `.` or `-`; 64 at most. */
export const HANDLER_TYPE_PATTERN = '^[a-z][a-z0-9_.-]{0,63}$';

/** The task a handler runs, as the handler sees it. */
export interface HandlerTask {
  id: number;
  key: string | null;
  type: string;
  /** 1 on the first run, 2 on the first retry… */
  attempt: number;
  maxAttempts: number;
  /** ISO-8601 UTC with milliseconds. */
  runAt: string;
  createdAt: string;
  tags: string[];
}

/** The log a handler writes to (pino's methods: an object of fields and/or a message). */
export interface HandlerLog {
  info(fieldsOrMessage: object | string, message?: string): void;
  warn(fieldsOrMessage: object | string, message?: string): void;
  error(fieldsOrMessage: object | string, message?: string): void;
  debug(fieldsOrMessage: object | string, message?: string): void;
}

/**
 * The task's completion transaction as a plain query function: `?` placeholders, answered with
 * the rows of a SELECT or `{ affectedRows, insertId }` of a write (mysql2's answer).
 */
export interface QueryFunction {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows or a write's header, as the handler reads them
  query<T = any>(sql: string, params?: unknown[]): Promise<T>;
}

export interface DatabaseRun<P> {
  /** The transaction that marks the task done: the handler's writes commit with it or not at all. */
  tx: QueryFunction;
  payload: P;
  task: HandlerTask;
  log: HandlerLog;
  /** The wall clock when the run started (epoch ms). */
  now: number;
}

export interface DatabaseBatchRun<P> {
  tx: QueryFunction;
  /** The tasks of this type due together, in runAt order (then id). */
  tasks: { task: HandlerTask; payload: P }[];
  log: HandlerLog;
  now: number;
}

export interface OutsideRun<P> {
  payload: P;
  task: HandlerTask;
  /** Aborted when the handler's time is up or punctual is stopping. */
  signal: AbortSignal;
  /** The same for every attempt of the task: send it, so the receiver drops repeats. */
  idempotencyKey: string;
  log: HandlerLog;
  now: number;
}

interface HandlerBase<S extends TSchema> {
  /** The task type: lower-case letters, digits and `_ . -`, starting with a letter, at most 64. */
  type: string;
  /** The payload's JSON Schema (`type: 'object'`), e.g. from TypeBox: checked on every create. */
  payload: S;
  /** A run still going after this long is failed and retried (default 30 s). */
  timeoutMs?: number;
}

/** Runs in the task's completion transaction: effect once. */
export interface DatabaseHandlerDefinition<S extends TSchema = TSchema> extends HandlerBase<S> {
  effect: 'database';
  /** Answers a short word for the log ("closed", "already paid"). */
  run(run: DatabaseRun<Static<S>>): Promise<string | void>;
  /** Optional: many due tasks in one call, one outcome per task in order. */
  runBatch?(run: DatabaseBatchRun<Static<S>>): Promise<(string | void)[]>;
}

/** Runs after a leased claim: at least once, with a stable idempotency key. */
export interface OutsideHandlerDefinition<S extends TSchema = TSchema> extends HandlerBase<S> {
  effect: 'outside';
  run(run: OutsideRun<Static<S>>): Promise<string | void>;
}

/**
 * A worker type: punctual never runs it, only leases it to pull workers (`POST /workers/lease`);
 * the schema checks every create. It has no `run` and no `timeoutMs` (the lease is the time limit).
 */
export interface WorkerTypeDefinition<S extends TSchema = TSchema> {
  type: string;
  effect: 'worker';
  payload: S;
}

export type HandlerDefinition<S extends TSchema = TSchema> =
  | DatabaseHandlerDefinition<S>
  | OutsideHandlerDefinition<S>
  | WorkerTypeDefinition<S>;

/** Types a handler; returns it unchanged. */
export function defineHandler<S extends TSchema>(handler: DatabaseHandlerDefinition<S>): DatabaseHandlerDefinition<S>;
export function defineHandler<S extends TSchema>(handler: OutsideHandlerDefinition<S>): OutsideHandlerDefinition<S>;
export function defineHandler<S extends TSchema>(handler: WorkerTypeDefinition<S>): WorkerTypeDefinition<S>;
export function defineHandler<S extends TSchema>(handler: HandlerDefinition<S>): HandlerDefinition<S> {
  return handler;
}

/**
 * An error no retry can fix: the task fails at once (from a handler, or from a pull worker's work()
 * callback). A module without this package throws any error with `permanent: true` instead;
 * punctual reads the property, not the class.
 */
export class PermanentFailure extends Error {
  override name = 'PermanentFailure';
  readonly permanent = true;
}
