/**
 * The one transaction runner, whoever holds the connection: `transaction` is BEGIN … COMMIT (any
 * error rolls back before it goes up; a connection whose ROLLBACK fails is destroyed), `autocommit`
 * the same without BEGIN. Either runs again from the start while the retry policy calls the error
 * worth it (by default a deadlock, a lock-wait timeout or a Galera certification conflict,
 * DEFAULT_TRIES in all), so the work keeps its state inside the callback.
 * See docs/architecture.md#the-transaction-runner.
 */
import type { PoolConnection } from 'mysql2/promise';
import { markIfLostBeforeCommit } from './errors.js';
import { openPipeline } from './pipeline.js';
import { lockConflicts, retrying, type RetryPolicy } from './retry.js';
import { DB } from './sql.js';

/** What the runner needs of a connection. */
export interface Queryable {
  query(options: { sql: string; timeout?: number }): Promise<unknown>;
  destroy(): void;
}

/** Lends a connection for the length of `fn` (and may cut it off past `deadlineMs`). */
export interface ConnectionSource<C extends Queryable> {
  withConnection<T>(fn: (conn: C) => PromiseLike<T>, deadlineMs?: number): Promise<T>;
}

export interface RunOptions {
  /** Which errors run the work again, how often and after how long: lockConflicts(DEFAULT_TRIES) unless said. */
  retry?: RetryPolicy;
  /** How long one try may hold its connection (the source's own deadline unless said). */
  deadlineMs?: number;
  /** A timeout for BEGIN, COMMIT and ROLLBACK, for a connection without a deadline of its own. */
  statementTimeoutMs?: number;
  /**
   * BEGIN travels with the work's first statement and COMMIT with what it queued last
   * (pipeline.ts): two round trips fewer. Only for a mysql2 connection with multiple statements.
   */
  pipelined?: boolean;
}

/** Tries of work that met a deadlock or a lock-wait timeout. */
export const DEFAULT_TRIES = 5;

/** One try, no retry: for a caller that retries a larger unit itself. */
export const ONCE: RetryPolicy = { retryable: () => false, tries: 1, delayMs: () => 0 };

/** A source that always lends the one connection `conn` (the caller keeps it and ends it). */
export function onConnection<C extends Queryable>(conn: C): ConnectionSource<C> {
  return { withConnection: async (fn) => fn(conn) };
}

/** BEGIN … COMMIT around `fn`, rolled back on any error, run again per the policy. */
export function transaction<C extends Queryable, T>(
  source: ConnectionSource<C>,
  fn: (conn: C) => Promise<T>,
  options: RunOptions = {},
): Promise<T> {
  const timeout = options.statementTimeoutMs;
  const control = (sql: string) => ({ sql, ...(timeout === undefined ? {} : { timeout }) });
  return retrying(
    () =>
      source.withConnection(async (conn) => {
        const pipeline = options.pipelined === true ? openPipeline(conn as unknown as PoolConnection) : undefined;
        if (pipeline !== undefined) pipeline.queue(DB.begin);
        else await conn.query(control(DB.begin));
        let committing = false;
        try {
          const value = await fn(conn);
          committing = true;
          await conn.query(control(DB.commit));
          return value;
        } catch (error) {
          // Lost before COMMIT went out: rolled back by the server, safe to run again (lockConflicts).
          if (!committing) markIfLostBeforeCommit(error);
          // What was held back is not sent: the transaction ends here.
          pipeline?.close();
          // A COMMIT that failed may leave the transaction open (or rolled back: ROLLBACK is harmless then).
          await conn.query(control(DB.rollback)).catch(() => conn.destroy());
          throw error;
        } finally {
          pipeline?.close();
        }
      }, options.deadlineMs),
    options.retry ?? lockConflicts(DEFAULT_TRIES),
  );
}

/** `fn` with each statement committing itself, run again per the policy. */
export function autocommit<C extends Queryable, T>(
  source: ConnectionSource<C>,
  fn: (conn: C) => Promise<T>,
  options: RunOptions = {},
): Promise<T> {
  return retrying(() => source.withConnection(fn, options.deadlineMs), options.retry ?? lockConflicts(DEFAULT_TRIES));
}
