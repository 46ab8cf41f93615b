/**
 * The MySQL pool. Every connection is put in UTC and READ COMMITTED
 * as it opens, whatever the server's defaults: times are read and written in UTC, and the
 * dispatcher's locking reads take no gap locks that would collide with the shop's inserts.
 *
 * A connection that broke is destroyed, never returned to the pool; TCP keep-alive finds
 * connections that a gateway dropped silently while they sat idle. Work runs on it through the
 * transaction runner (transaction.ts); the statements are in sql.ts.
 */
import { performance } from 'node:perf_hooks';
import { drizzle, type MySql2Database } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { Gauge, type Registry } from 'prom-client';
import { TimeoutError, withTimeout } from '../util/async.js';
import { isConnectionError, isNodeNotReady } from './errors.js';
import { HostRotation, parseDatabaseUrl } from './hosts.js';
import * as schema from './schema.js';
import { DB } from './sql.js';
import { accessOptions, checkIdentity, checksIdentity, type DatabaseAccess, NameCheck } from './tls.js';
import type { ConnectionSource } from './transaction.js';

export type Db = MySql2Database<typeof schema>;
export type Connection = mysql.PoolConnection;

/**
 * How a multi-row INSERT tells the id of each row: MariaDB answers them (INSERT … RETURNING);
 * MySQL hands out consecutive ids when innodb_autoinc_lock_mode ≤ 1 and the increment is 1;
 * otherwise rows are inserted one statement each.
 */
export type InsertIds = 'returning' | 'consecutive' | 'one-by-one';

/** Every connection's time zone for the Dates it writes and reads (mysql2's `timezone`): UTC. */
const TIME_ZONE = 'Z';

/** 0000-01-01 00:00:00.000 and 9999-12-31 23:59:59.999 UTC: the instants of four-digit years. */
const FIRST_INSTANT = -62_167_219_200_000;
const LAST_INSTANT = 253_402_300_799_999;
const MINUTE_MS = 60_000;

const pad = (n: number, digits: number) => String(n).padStart(digits, '0');

/** The minute datetimeLiteral wrote last, and its text up to the seconds: `'2030-01-01 10:00:`. */
let lastMinute = Number.NaN;
let lastMinuteText = '';

/**
 * An instant as the SQL literal mysql2 writes for its Date on these connections
 * ('2030-01-01 00:00:00.000', UTC), for statements written as text. The text up to the minute is
 * kept for the next call: a batch's instants (its create time, runAts close together) mostly
 * share their minute, and formatting a Date costs a microsecond (mysql2's and toISOString alike).
 * An instant outside years 0–9999 (or not a number) is left to mysql2.
 */
export function datetimeLiteral(ms: number): string {
  if (!(ms >= FIRST_INSTANT && ms <= LAST_INSTANT)) return mysql.escape(new Date(ms), false, TIME_ZONE);
  const instant = Math.trunc(ms); // as a Date keeps it
  const minute = Math.floor(instant / MINUTE_MS);
  if (minute !== lastMinute) {
    const at = new Date(minute * MINUTE_MS);
    lastMinuteText =
      `'${pad(at.getUTCFullYear(), 4)}-${pad(at.getUTCMonth() + 1, 2)}-${pad(at.getUTCDate(), 2)} ` +
      `${pad(at.getUTCHours(), 2)}:${pad(at.getUTCMinutes(), 2)}:`;
    lastMinute = minute;
  }
  const inMinute = instant - minute * MINUTE_MS;
  return `${lastMinuteText}${pad(Math.floor(inMinute / 1000), 2)}.${pad(inMinute % 1000, 3)}'`;
}

/**
 * mysql2's formatting of a statement's values, except that a statement without values is sent
 * as it is: mysql2 (3.24) scans every statement for placeholders even then, and a batch's INSERT
 * written as text is a quarter of a megabyte to scan (4 ms of CPU per 1,000 rows).
 */
function queryFormat(sql: string, values: unknown): string {
  if (values === undefined || (Array.isArray(values) && values.length === 0)) return sql;
  return mysql.format(sql, values as never, false, TIME_ZONE);
}

/**
 * `sql` made one piece now. V8 keeps a string built with `+` as a tree of its pieces until it is
 * read: a batch's INSERT text is tens of thousands of them, kept alive (and copied by each young
 * garbage collection) across the awaits before it is sent, then joined when mysql2 measures it.
 * Read once right after it is written, the tree dies young and the join is done in cache.
 */
export function flatText(sql: string): string {
  sql.charCodeAt(0);
  return sql;
}

/** A string, a number or NULL as the SQL literal mysql2 writes for a placeholder's value. */
export function sqlLiteral(value: string | number | null): string {
  return mysql.escape(value);
}

/** No statement of punctual's holds a connection this long unless its peer stopped answering. */
const DEFAULT_DEADLINE_MS = 30_000;
/**
 * A connection idle longer than this is pinged before use: a gateway may have dropped it, or the
 * server closed it (wait_timeout) in a way the socket has not shown yet. As HikariCP does. Idle
 * time is measured on the monotonic clock, so a step of the wall clock changes nothing.
 */
const VALIDATE_AFTER_IDLE_MS = 1000;
const VALIDATE_TIMEOUT_MS = 2000;

/** A connection error (so callers retry) for a connection that stopped answering. */
function connectionStalled(deadlineMs: number): Error {
  return Object.assign(new Error(`the database connection did not answer for ${deadlineMs} ms and was dropped`), {
    code: 'PROTOCOL_SEQUENCE_TIMEOUT',
    fatal: true,
  });
}

export interface DatabaseOptions {
  url: string;
  poolSize: number;
  lockWaitTimeoutS: number;
  /** How long a statement may hold its connection (default 30 s). */
  deadlineMs?: number;
  /** Told when new connections move to another host of a multi-host DATABASE_URL. */
  onHostSwitch?: (from: string, to: string) => void;
  /** Where the pool's gauges (connections open, in use, callers waiting) go. */
  registry?: Registry;
  /** The password and TLS settings (DATABASE_PASSWORD, DATABASE_SSL_*). */
  access?: DatabaseAccess;
}

const KEEP_ALIVE_INITIAL_DELAY_MS = 10_000;

/** The socket under a promise connection (its core connection's stream). */
function streamOf(conn: mysql.Connection): object | undefined {
  return (conn as unknown as { connection?: { stream?: object } }).connection?.stream;
}

/**
 * A connection to the first host of DATABASE_URL that answers, in the order given (the only host
 * of a one-host URL). The last host's error goes up when none answers.
 */
export async function connectFirst(
  url: string,
  options: mysql.ConnectionOptions = {},
  path?: string,
  access?: DatabaseAccess,
): Promise<mysql.Connection> {
  let last: unknown;
  for (const hostUrl of parseDatabaseUrl(url).urls) {
    const target = new URL(hostUrl);
    if (path !== undefined) target.pathname = path;
    try {
      const conn = await mysql.createConnection({ uri: target.toString(), connectTimeout: 10_000, ...options, ...accessOptions(access) });
      const refused = checksIdentity(access) ? checkIdentity(streamOf(conn), target.hostname) : undefined;
      if (refused !== undefined) {
        conn.destroy();
        throw refused;
      }
      return conn;
    } catch (error) {
      last = error;
    }
  }
  throw last;
}

/**
 * A fresh connection for each piece of work, ended after it (outside the pool: a migration runs
 * before the pool is used, CREATE DATABASE before the database exists). `path` '/' selects no database.
 */
export function freshConnections(
  url: string,
  options: mysql.ConnectionOptions = {},
  path?: string,
  access?: DatabaseAccess,
): ConnectionSource<mysql.Connection> {
  return {
    async withConnection(fn) {
      const conn = await connectFirst(url, options, path, access);
      try {
        return await fn(conn);
      } finally {
        await conn.end().catch(() => conn.destroy());
      }
    },
  };
}

/**
 * Creates the database DATABASE_URL names when it is missing. Looked up first, so a start against
 * a database that is there runs no DDL: on Galera even CREATE DATABASE IF NOT EXISTS is replicated
 * in total order and aborts the writes running on every node (the aborted autocommit INSERT …
 * RETURNING is run again by the server, and its client is told the ids of the first run).
 */
export async function ensureDatabase(url: string, name: string, access?: DatabaseAccess): Promise<void> {
  await freshConnections(url, {}, '/', access).withConnection(async (conn) => {
    const [found] = await conn.query<mysql.RowDataPacket[]>(DB.databaseExists, [name]);
    if (found.length === 0) await conn.query(DB.createDatabase, [name]);
  });
}

export async function dropDatabase(url: string, name: string, access?: DatabaseAccess): Promise<void> {
  await freshConnections(url, {}, '/', access).withConnection((conn) => conn.query(DB.dropDatabase, [name]));
}

export class Database implements ConnectionSource<Connection> {
  readonly pool: mysql.Pool;
  readonly #drizzleOf = new WeakMap<Connection, Db>();
  #closing: Promise<void> | undefined;
  #insertIds: Promise<InsertIds> | undefined;
  #pipelines: Promise<boolean> | undefined;
  #galera: Promise<boolean> | undefined;
  readonly #poolSize: number;
  readonly #deadlineMs: number;
  readonly #open = new Set<object>();
  readonly #checkedOut = new Set<object>();
  /** When each connection last went back to the pool, monotonic ms (a new one has no entry: it is not idle). */
  readonly #releasedAt = new WeakMap<object, number>();
  /** Callers waiting for a connection in #acquire. */
  #waiting = 0;
  /** Which host new connections go to, for a DATABASE_URL with several hosts. */
  readonly #hosts: HostRotation | undefined;
  /** The first host's URL (the pool's and connectOwn's options; the rotation picks the host). */
  readonly #firstUrl: string;
  /** The password and TLS options of every connection. */
  readonly #access: mysql.ConnectionOptions;
  /** verify-identity: the name is checked here (tls.ts), against the host each socket went to. */
  readonly #names: NameCheck | undefined;
  /** The host of a one-host DATABASE_URL. */
  readonly #onlyHost: string;
  /** Pool connections refused by that check: destroyed, their error given to whoever asked for them. */
  readonly #refused = new WeakMap<object, Error>();

  constructor(options: DatabaseOptions) {
    this.#poolSize = options.poolSize;
    this.#deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    const { hosts, urls } = parseDatabaseUrl(options.url);
    const hostName = ({ host, port }: { host: string; port: number }) => `${host}:${port}`;
    this.#hosts =
      hosts.length > 1 ? new HostRotation(hosts, (from, to) => options.onHostSwitch?.(hostName(from), hostName(to))) : undefined;
    const rotation = this.#hosts;
    this.#firstUrl = urls[0]!;
    this.#names = checksIdentity(options.access) ? new NameCheck() : undefined;
    this.#access = accessOptions(options.access);
    this.#onlyHost = hosts[0]!.host;
    this.pool = mysql.createPool({
      uri: this.#firstUrl,
      ...this.#access,
      // Several hosts: each new connection opens its socket to the host the rotation names.
      ...(rotation !== undefined ? { stream: () => rotation.connect(KEEP_ALIVE_INITIAL_DELAY_MS) } : {}),
      connectionLimit: options.poolSize,
      maxIdle: options.poolSize,
      idleTimeout: 60_000,
      connectTimeout: 5_000,
      enableKeepAlive: true,
      keepAliveInitialDelay: KEEP_ALIVE_INITIAL_DELAY_MS,
      timezone: TIME_ZONE,
      dateStrings: false,
      supportBigNumbers: true,
      bigNumberStrings: false,
      // The batch transaction sends several statements in one round trip (pipeline.ts). Every
      // value from input is escaped by mysql2: through a placeholder, or by its `escape` where
      // the intake writes its INSERTs as text (insertTuple, tagTuples).
      multipleStatements: true,
      queryFormat,
      // Capturing a stack trace for every query costs more than the query on the hot paths.
      trace: false,
    });
    // Runs before anything else on the new connection: commands on a connection run in order.
    this.pool.pool.on('connection', (conn) => {
      const refused = this.#identityError((conn as { stream?: object }).stream, () => conn.destroy());
      if (refused !== undefined) {
        this.#refused.set(conn, refused);
        conn.destroy();
        return;
      }
      conn.query(DB.poolSession, [options.lockWaitTimeoutS], () => undefined);
      conn.query(DB.readCommitted, () => undefined);
    });
    // The pool's own counts are private fields: count from its public events and each
    // connection's socket instead (a connection is gone when its socket closes).
    this.pool.pool.on('connection', (conn) => {
      rotation?.ready((conn as { stream?: object }).stream);
      this.#open.add(conn);
      (conn as { stream?: NodeJS.EventEmitter }).stream?.once('close', () => {
        this.#open.delete(conn);
        this.#checkedOut.delete(conn);
      });
    });
    this.pool.pool.on('acquire', (conn) => void this.#checkedOut.add(conn));
    this.pool.pool.on('release', (conn) => void this.#checkedOut.delete(conn));
    if (options.registry !== undefined) this.#registerGauges(options.registry);
  }

  /** verify-identity: why the certificate on `stream` does not fit its host. */
  #identityError(stream: unknown, end: () => void): Error | undefined {
    const rotation = this.#hosts;
    const names = this.#names;
    if (names === undefined) return undefined;
    if (rotation === undefined) return names.check(stream, this.#onlyHost, end);
    const index = rotation.hostOf(stream as object);
    const host = index === undefined ? undefined : rotation.hosts[index]?.host;
    return host === undefined ? new Error('the database connection was not opened by the host rotation') : names.check(stream, host, end);
  }

  #registerGauges(registry: Registry): void {
    const usage = (field: 'inUse' | 'waiting' | 'total') => {
      const read = () => this.usage[field];
      return function (this: Gauge) {
        this.set(read());
      };
    };
    const registers = [registry];
    new Gauge({ name: 'punctual_db_pool_in_use', help: 'Database connections checked out.', registers, collect: usage('inUse') });
    new Gauge({
      name: 'punctual_db_pool_waiting',
      help: 'Callers waiting for a database connection.',
      registers,
      collect: usage('waiting'),
    });
    new Gauge({ name: 'punctual_db_pool_open', help: 'Database connections open.', registers, collect: usage('total') });
  }

  /** The pool the configuration's database settings ask for. */
  static fromConfig(
    settings: Pick<DatabaseOptions, 'url' | 'poolSize' | 'lockWaitTimeoutS'> & DatabaseAccess,
    onHostSwitch?: DatabaseOptions['onHostSwitch'],
    registry?: Registry,
  ): Database {
    return new Database({
      url: settings.url,
      poolSize: settings.poolSize,
      lockWaitTimeoutS: settings.lockWaitTimeoutS,
      onHostSwitch,
      registry,
      access: settings,
    });
  }

  /**
   * A connection of its own, outside the pool, for work that must not wait behind the pool (the
   * lease keeper): in UTC, to the host the pool's new connections go to. A host that does not
   * answer moves this and the pool's next connections on to the next host, as in the pool; so
   * does `failed(conn, error)` for a node that answers but is not ready.
   */
  async connectOwn(connectTimeoutMs: number, statementTimeoutMs = connectTimeoutMs): Promise<mysql.Connection> {
    const rotation = this.#hosts;
    const conn = await mysql.createConnection({
      uri: this.#firstUrl,
      ...this.#access,
      ...(rotation !== undefined ? { stream: () => rotation.connect(KEEP_ALIVE_INITIAL_DELAY_MS) } : {}),
      timezone: TIME_ZONE,
      connectTimeout: connectTimeoutMs,
      enableKeepAlive: true,
      keepAliveInitialDelay: KEEP_ALIVE_INITIAL_DELAY_MS,
    });
    rotation?.ready(streamOf(conn));
    const refused = this.#identityError(streamOf(conn), () => conn.destroy());
    if (refused !== undefined) {
      conn.destroy();
      throw refused;
    }
    try {
      await conn.query({ sql: DB.utcSession, timeout: statementTimeoutMs });
    } catch (error) {
      this.failed(conn, error);
      conn.destroy();
      throw error;
    }
    return conn;
  }

  /** How many hosts DATABASE_URL names. */
  get hostCount(): number {
    return this.#hosts?.hosts.length ?? 1;
  }

  /** `conn` (from connectOwn) failed with `error`: when its node is not ready, new connections go to the next host. */
  failed(conn: mysql.Connection, error: unknown): void {
    if (isNodeNotReady(error)) this.#hosts?.failed(streamOf(conn));
  }

  /** `conn` broke: destroyed; when its node said it is not ready, new connections go to the next host. */
  #drop(conn: Connection, error: unknown): void {
    if (isNodeNotReady(error)) this.#hosts?.failed((conn.connection as { stream?: object }).stream);
    conn.destroy();
  }

  /** Connections open, checked out right now, and callers waiting for one. */
  get usage(): { total: number; inUse: number; waiting: number } {
    return { total: this.#open.size, inUse: this.#checkedOut.size, waiting: this.#waiting };
  }

  /** Whether the server is a Galera node (wsrep_on); asked once. */
  galera(): Promise<boolean> {
    this.#galera ??= this.pool
      .query<mysql.RowDataPacket[]>(DB.wsrepOn)
      .then(([rows]) => String(rows[0]?.Value ?? 'OFF').toUpperCase() === 'ON')
      .catch((error: unknown) => {
        this.#galera = undefined;
        throw error;
      });
    return this.#galera;
  }

  /**
   * Whether the batch transaction may be pipelined (pipeline.ts); asked once. Only MariaDB checks a
   * row count inline, before COMMIT. And not on a Galera node: a transaction aborted there by a
   * replicated write while the server runs a multi-statement text does not stop the text; the
   * statements after the abort run on, each committing itself, and the client hears no error
   * (test/cluster/pipeline.test.ts shows it), so the effects and the completion would part.
   */
  pipelines(): Promise<boolean> {
    this.#pipelines ??= this.pool
      .query<mysql.RowDataPacket[]>(DB.version)
      .then(async ([[row]]) => /MariaDB/i.test(String(row?.version)) && !(await this.galera()))
      .catch((error: unknown) => {
        this.#pipelines = undefined;
        throw error;
      });
    return this.#pipelines;
  }

  /** What this server offers for learning the ids of a multi-row INSERT; asked once. */
  insertIds(): Promise<InsertIds> {
    this.#insertIds ??= this.pool
      .query<mysql.RowDataPacket[]>(DB.insertIdTraits)
      .then(([[row]]) => {
        const mariadb = /^(\d+)\.(\d+).*MariaDB/i.exec(String(row?.version));
        if (mariadb !== null && Number(mariadb[1]) * 100 + Number(mariadb[2]) >= 1005) return 'returning';
        return Number(row?.mode) <= 1 && Number(row?.step) === 1 ? 'consecutive' : 'one-by-one';
      })
      .catch((error: unknown) => {
        this.#insertIds = undefined;
        throw error;
      });
    return this.#insertIds;
  }

  drizzleOf(conn: Connection): Db {
    let db = this.#drizzleOf.get(conn);
    if (db === undefined) {
      db = drizzle({ client: conn, schema, mode: 'default' });
      this.#drizzleOf.set(conn, db);
    }
    return db;
  }

  /** Back to the pool (or straight to a caller waiting for one), noting when. */
  #release(conn: Connection): void {
    this.#releasedAt.set(conn.connection, performance.now());
    conn.release();
  }

  /**
   * A connection from the pool that answers: one that sat idle is pinged first, and replaced
   * when the ping fails, so a dead connection costs a ping instead of a failed statement.
   */
  async #acquire(): Promise<Connection> {
    for (let tries = 0, refused = 0; ; tries++) {
      this.#waiting++;
      let conn: Connection;
      try {
        conn = await this.pool.getConnection().finally(() => this.#waiting--);
        const refused = this.#refused.get(conn.connection);
        if (refused !== undefined) throw refused;
      } catch (error) {
        // Several hosts: a host that did not answer moved the rotation on; each is tried once.
        if (this.#hosts !== undefined && isConnectionError(error) && ++refused < this.#hosts.hosts.length) continue;
        throw error;
      }
      const releasedAt = this.#releasedAt.get(conn.connection);
      const idle = releasedAt === undefined ? 0 : performance.now() - releasedAt;
      if (idle < VALIDATE_AFTER_IDLE_MS || tries > this.#poolSize) return conn;
      try {
        await withTimeout(conn.ping(), VALIDATE_TIMEOUT_MS);
        return conn;
      } catch {
        conn.destroy();
      }
    }
  }

  /**
   * Opens up to `count` connections now and puts them back idle, so the first batches after a start
   * do not each pay for a handshake (several round trips across a network). Never throws: a
   * connection that could not be opened is opened again when it is needed.
   */
  async warm(count: number): Promise<void> {
    const opened = await Promise.allSettled(Array.from({ length: Math.min(count, this.#poolSize) }, () => this.pool.getConnection()));
    for (const conn of opened) if (conn.status === 'fulfilled') this.#release(conn.value);
  }

  /**
   * Runs `fn` on one connection of the pool. A connection held past `deadlineMs` is killed and
   * dropped: a peer that stopped answering (a connection a network device swallowed without a
   * reset) can hold nothing up for longer than that.
   */
  async withConnection<T>(fn: (conn: Connection) => PromiseLike<T>, deadlineMs = this.#deadlineMs): Promise<T> {
    const conn = await this.#acquire();
    try {
      const result = await withTimeout(fn(conn), deadlineMs, () => this.kill(conn));
      this.#release(conn);
      return result;
    } catch (error) {
      if (error instanceof TimeoutError || isConnectionError(error)) this.#drop(conn, error);
      else this.#release(conn);
      throw error instanceof TimeoutError ? connectionStalled(deadlineMs) : error;
    }
  }

  /**
   * Ends `conn` from the server side (its transaction rolls back and its locks go at once) and
   * drops it: for a handler that overran its time while holding the connection.
   */
  kill(conn: Connection): void {
    const threadId = conn.connection.threadId;
    const stream = (conn.connection as { stream?: object }).stream;
    conn.destroy();
    if (threadId === null) return;
    const rotation = this.#hosts;
    if (rotation === undefined) {
      this.pool.query(DB.killConnection, [Number(threadId)]).catch(() => undefined);
      return;
    }
    // Thread ids are per server: KILL only through a connection to the same host.
    const host = rotation.hostOf(stream);
    void this.pool
      .getConnection()
      .then(async (other) => {
        try {
          if (rotation.hostOf((other.connection as { stream?: object }).stream) === host) {
            await other.query(DB.killConnection, [Number(threadId)]);
          }
        } finally {
          other.release();
        }
      })
      .catch(() => undefined);
  }

  /** True when the server answers a trivial query within `timeoutMs`. */
  async ping(timeoutMs = 2000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await Promise.race([this.withConnection((conn) => conn.query(DB.ping)).then(() => true), timeout]);
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Ends the pool. A connection still checked out now is stuck (the stop already waited for the
   * work it carried, e.g. a boot query waiting for a row lock): it is dropped, so ending the pool
   * does not wait for it; its transaction rolls back on the server.
   */
  close(): Promise<void> {
    if (this.#closing === undefined) {
      for (const conn of this.#checkedOut) (conn as { destroy(): void }).destroy();
      this.#closing = this.pool.end().catch(() => undefined);
    }
    return this.#closing;
  }
}
