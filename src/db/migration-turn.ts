/**
 * The migration's turn: one process migrates a database at a time, across a Galera cluster too,
 * and a dead holder's turn is free within seconds.
 *
 * - The turn is a row of punctual_migration_turn (holder, node, since, until). Its holder renews
 *   `until` every TURN_RENEW_MS on a connection of its own, so the row outlives the holder by at
 *   most TURN_TTL_MS; a row whose `until` passed is a dead (or frozen) holder's and is taken over.
 *   A second node's insert fails as a duplicate or a certification conflict, and waits.
 * - The holder also holds GET_LOCK(name) on its migrating connection. The server drops it with the
 *   connection, so when a waiter on the same node (same @@hostname:@@port) gets the lock, a row of
 *   that node is a dead process's: taken over at once, not TURN_TTL_MS later. GET_LOCK holds on
 *   one node only, hence the row.
 * - A waiter logs once per holder what it waits for, and waits as long as the holder renews (a
 *   long ALTER is work, not a hang); a stop (the signal) ends the wait.
 * - A holder whose renewal finds its row gone or another's (it froze past `until` and was taken
 *   over) has lost the turn: the migrator checks `lost` before each statement and starts again.
 * See docs/architecture.md#migrations.
 */
import type mysql from 'mysql2/promise';
import type { Logger } from 'pino';
import { isDuplicateKey, isLockConflict, loggable } from './errors.js';
import { tableFacts } from './migration-guard.js';

/** How long a turn row outlives its holder's last renewal. */
export const TURN_TTL_MS = 10_000;
export const TURN_RENEW_MS = 2_000;
/** How often a waiter looks again. */
const TURN_POLL_MS = 250;

const TURN_TABLE = 'punctual_migration_turn';
const SQL = {
  create: `CREATE TABLE IF NOT EXISTS ${TURN_TABLE} (name VARCHAR(64) NOT NULL PRIMARY KEY, holder VARCHAR(96) NOT NULL,
    node VARCHAR(160) NOT NULL DEFAULT '', since DATETIME(3) NULL, until DATETIME(3) NOT NULL) ENGINE=InnoDB`,
  /** The columns a turn table made by an earlier release lacks. */
  addNode: `ALTER TABLE ${TURN_TABLE} ADD node VARCHAR(160) NOT NULL DEFAULT ''`,
  addSince: `ALTER TABLE ${TURN_TABLE} ADD since DATETIME(3) NULL`,
  widenHolder: `ALTER TABLE ${TURN_TABLE} MODIFY holder VARCHAR(96) NOT NULL`,
  node: "SELECT CONCAT(@@hostname, ':', @@port) AS node",
  getLock: 'SELECT GET_LOCK(?, ?) AS got',
  releaseLock: 'SELECT RELEASE_LOCK(?)',
  lockHolder: 'SELECT IS_USED_LOCK(?) AS connection',
  read: `SELECT holder, node, since, until, until < UTC_TIMESTAMP(3) AS stale FROM ${TURN_TABLE} WHERE name = ?`,
  dropDead: `DELETE FROM ${TURN_TABLE} WHERE name = ? AND holder = ?`,
  take: `INSERT INTO ${TURN_TABLE} (name, holder, node, since, until)
    VALUES (?, ?, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND)`,
  renew: `UPDATE ${TURN_TABLE} SET until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND WHERE name = ? AND holder = ?`,
  end: `DELETE FROM ${TURN_TABLE} WHERE name = ? AND holder = ?`,
} as const;

type Rows = mysql.RowDataPacket[];

/** Who holds a turn, as its row says. */
export interface TurnHolder {
  holder: string;
  node: string;
  since: string | null;
  until: string;
}

/** The wait for the turn ended because the process stops. */
export class TurnWaitStopped extends Error {
  override name = 'TurnWaitStopped';
  constructor() {
    super('stopped while waiting for the migration turn');
  }
}

export interface TurnOptions {
  /** The lock's and the row's name (one per database). */
  name: string;
  /** This process, as the row and the log name it. */
  holder: string;
  log?: Logger;
  signal?: AbortSignal;
  /** A connection of its own for the renewals. */
  connect: () => Promise<mysql.Connection>;
}

/** The turn table, made or brought to this release's shape, with no DDL when it is so already. */
async function ensureTurnTable(conn: mysql.Connection): Promise<void> {
  const facts = await tableFacts(conn, TURN_TABLE);
  if (!facts.exists) {
    await conn.query(SQL.create);
    return;
  }
  const steps = [
    [!facts.columns.has('node'), SQL.addNode],
    [!facts.columns.has('since'), SQL.addSince],
    [facts.columns.get('holder')?.type !== 'varchar(96)', SQL.widenHolder],
  ] as const;
  for (const [needed, sql] of steps) {
    if (!needed) continue;
    // Another process may bring it over at the same moment: its duplicate column is this one's.
    await conn.query(sql).catch((error: unknown) => {
      if ((error as { errno?: number }).errno !== 1060) throw error;
    });
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

const instant = (value: unknown): string | null => (value instanceof Date ? value.toISOString() : typeof value === 'string' ? value : null);

function holderOf(row: mysql.RowDataPacket): TurnHolder {
  return { holder: String(row.holder), node: String(row.node), since: instant(row.since), until: instant(row.until) ?? '' };
}

export class MigrationTurn {
  #renewer: NodeJS.Timeout | undefined;
  #renewConn: mysql.Connection | undefined;
  #renewing: Promise<void> = Promise.resolve();
  #lost = false;
  #ended = false;

  private constructor(
    private readonly conn: mysql.Connection,
    private readonly options: TurnOptions,
    private readonly holdsLock: boolean,
  ) {}

  /** Whether another process took the turn over (this one's renewals stopped for longer than TURN_TTL_MS). */
  get lost(): boolean {
    return this.#lost;
  }

  /** Waits for the turn on `conn` (which must stay open while it is held) and takes it. */
  static async take(conn: mysql.Connection, options: TurnOptions): Promise<MigrationTurn> {
    const { name, holder, log, signal } = options;
    await ensureTurnTable(conn);
    const [[here]] = await conn.query<Rows>(SQL.node);
    const node = String(here?.node);
    let holdsLock = false;
    const toldOf = new Set<string>();
    const tell = (what: TurnHolder | { connection: number }) => {
      const id = 'holder' in what ? `${what.holder}@${what.node}` : `connection ${what.connection}`;
      if (toldOf.has(id)) return;
      toldOf.add(id);
      log?.info({ waitingFor: what }, 'waiting for the migration turn: another process is migrating this database');
    };
    try {
      for (;;) {
        if (signal?.aborted === true) throw new TurnWaitStopped();
        if (!holdsLock) {
          const [[lock]] = await conn.query<Rows>(SQL.getLock, [name, 0]);
          holdsLock = lock?.got === 1;
        }
        const [rows] = await conn.query<Rows>(SQL.read, [name]);
        const row = rows[0];
        if (row !== undefined) {
          const current = holderOf(row);
          // With the lock, a row of this node is a process whose connection is gone.
          const dead = Number(row.stale) === 1 || (holdsLock && current.node === node);
          if (dead) {
            await conn.query(SQL.dropDead, [name, current.holder]);
            log?.info({ previous: current }, 'took over the migration turn of a process that is gone');
          } else {
            tell(current);
            await sleep(TURN_POLL_MS, signal);
            continue;
          }
        } else if (!holdsLock) {
          // The lock's holder is on this node and has not written its row yet, or is frozen without one.
          const [[used]] = await conn.query<Rows>(SQL.lockHolder, [name]);
          if (used?.connection !== null && used?.connection !== undefined) {
            tell({ connection: Number(used.connection) });
            await sleep(TURN_POLL_MS, signal);
            continue;
          }
        }
        try {
          await conn.query(SQL.take, [name, holder, node, TURN_TTL_MS * 1000]);
        } catch (error) {
          if (!isDuplicateKey(error) && !isLockConflict(error)) throw error;
          await sleep(TURN_POLL_MS, signal); // another node's process took it first
          continue;
        }
        const turn = new MigrationTurn(conn, options, holdsLock);
        turn.#schedule();
        return turn;
      }
    } catch (error) {
      if (holdsLock) await conn.query(SQL.releaseLock, [name]).catch(() => undefined);
      throw error;
    }
  }

  #schedule(): void {
    this.#renewer = setTimeout(() => {
      this.#renewing = this.#renew().finally(() => {
        if (!this.#ended) this.#schedule();
      });
    }, TURN_RENEW_MS);
    this.#renewer.unref();
  }

  async #renew(): Promise<void> {
    const { name, holder, log } = this.options;
    try {
      this.#renewConn ??= await this.options.connect();
      const [result] = await this.#renewConn.query<mysql.ResultSetHeader>(SQL.renew, [TURN_TTL_MS * 1000, name, holder]);
      if (result.affectedRows === 0 && !this.#ended) {
        this.#lost = true;
        log?.warn({ holder }, 'lost the migration turn: it was not renewed in time and another process took it over');
      }
    } catch (error) {
      log?.warn({ err: loggable(error) }, 'could not renew the migration turn; trying again');
      this.#renewConn?.destroy();
      this.#renewConn = undefined;
    }
  }

  /** Gives the turn back: the row first, then the lock (a waiter with the lock and no row takes it at once). */
  async end(): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#renewer);
    await this.#renewing;
    await this.#renewConn?.end().catch(() => this.#renewConn?.destroy());
    const { name, holder } = this.options;
    try {
      await this.conn.query(SQL.end, [name, holder]);
    } finally {
      if (this.holdsLock) await this.conn.query(SQL.releaseLock, [name]);
    }
  }
}
