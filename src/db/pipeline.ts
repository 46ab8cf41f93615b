/**
 * Statements held back to travel with the next one: fewer round trips to a database across the
 * network. While a pipeline is open on a connection, `queue(sql, values)` holds a statement
 * (formatted with the connection's own escaping, as a query would be) instead of sending it, and
 * the next query on that connection, whoever sends it (the store, a handler, drizzle, the
 * transaction runner's COMMIT), carries every held statement before its own, in order, as one
 * multi-statement text: one round trip. The server runs them in order and stops at the first
 * error, so nothing after a failed statement runs, a COMMIT least of all; the caller gets that
 * error, and the transaction runner rolls back.
 *
 * The batch transaction uses it (db/transaction.ts `pipelined`): BEGIN travels with the claim,
 * and the handler's deferred writes, the completion and its row-count check travel with COMMIT.
 * See docs/architecture.md#round-trips-per-firing.
 */
import type mysql from 'mysql2/promise';

/**
 * `statements`: how many statements the caller's own text holds (default 1); it gets the answers
 * of those, as an array, as a multi-statement query without a pipeline answers.
 */
type QueryOptions = { sql: string; values?: unknown; timeout?: number; rowsAsArray?: boolean; statements?: number };

const pipelines = new WeakMap<object, Pipeline>();

export class Pipeline {
  readonly #conn: mysql.PoolConnection;
  /** The connection's own query, put back by close(). */
  readonly #own: unknown;
  readonly #query: (options: QueryOptions, values?: unknown) => Promise<[unknown, unknown]>;
  #held: string[] = [];

  constructor(conn: mysql.PoolConnection) {
    this.#conn = conn;
    this.#own = (conn as unknown as { query: unknown }).query;
    this.#query = (options, values) =>
      (this.#own as (this: unknown, ...args: unknown[]) => Promise<[unknown, unknown]>).call(conn, options, values);
    const send = (options: string | QueryOptions, values?: unknown) => this.#send(options, values);
    (conn as unknown as { query: unknown }).query = send;
  }

  /** Holds `sql` (with `values` escaped in) until the next query on the connection. */
  queue(sql: string, values?: unknown): void {
    this.#held.push(this.#conn.format(sql, values));
  }

  /** Statements held now. */
  get held(): number {
    return this.#held.length;
  }

  /** Drops what is held and gives the connection its own query back. */
  close(): void {
    this.#held = [];
    (this.#conn as unknown as { query: unknown }).query = this.#own;
    pipelines.delete(this.#conn);
  }

  async #send(options: string | QueryOptions, values?: unknown): Promise<unknown> {
    const query = this.#query;
    const asOptions: QueryOptions = typeof options === 'string' ? { sql: options } : options;
    if (this.#held.length === 0) return query(asOptions, values ?? asOptions.values);
    const own = this.#conn.format(asOptions.sql, values ?? asOptions.values);
    const held = this.#held;
    this.#held = [];
    const [results, fields] = (await query({ ...asOptions, values: undefined, sql: [...held, own].join(';\n') })) as [unknown[], unknown[]];
    // The caller gets the answers of its own statements only: one, or the array of its several.
    const mine = asOptions.statements ?? 1;
    if (mine > 1) return [results.slice(-mine), fields?.slice(-mine)];
    return [results[results.length - 1], fields?.[fields.length - 1]];
  }
}

/** Opens a pipeline on `conn` (closed by the caller, before the connection goes back to the pool). */
export function openPipeline(conn: mysql.PoolConnection): Pipeline {
  const pipeline = new Pipeline(conn);
  pipelines.set(conn, pipeline);
  return pipeline;
}

/** The pipeline open on `conn`, if any. */
export function pipelineOf(conn: object): Pipeline | undefined {
  return pipelines.get(conn);
}
