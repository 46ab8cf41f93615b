/**
 * Applies the migrations in drizzle/ at boot (and for `punctual migrate`), so that a start killed
 * at any statement leaves a database the next start finishes.
 *
 * - One process migrates a database at a time (migration-turn.ts); a dead holder's turn is free
 *   within seconds, and a waiter says whom it waits for.
 * - Each statement runs only where its effect is missing (migration-guard.ts), so a migration cut
 *   off by a kill, a lost connection or a node restart is run again from its first statement and
 *   completes. Each migration is recorded as drizzle's migrator records it, after its statements.
 * - A stop (the signal) ends the work between two statements, never inside one: the next start
 *   goes on from there. Each migration applied is one log line with its time.
 * - A database that recorded the newest migration (every start but the first after an upgrade)
 *   is left after one query: no lock, no turn, no files read.
 *
 * Hand-written rather than drizzle's migrator: it runs a file's statements blindly and records
 * the file after them, which a kill between the two breaks for good on a server whose DDL is not
 * transactional. See docs/architecture.md#migrations and docs/development.md#migrations-that-survive-a-kill.
 */
import { performance } from 'node:perf_hooks';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type mysql from 'mysql2/promise';
import type { Logger } from 'pino';
import { getTableName } from 'drizzle-orm';
import { connectFirst, freshConnections } from './connection.js';
import type { DatabaseAccess } from './tls.js';
import { isNoSuchTable, isLockConflict, isRanElsewhere, rootMessage } from './errors.js';
import { retrying } from './retry.js';
import { DB } from './sql.js';
import { auditLog, limitSlots, members, meta, shardLeases, taskRuns, tasks, taskTags, typeControls } from './schema.js';
import { MIGRATIONS_TABLE, migrationJournal, newestMigration, readMigrations, type Migration } from './migration-files.js';
import { pendingSql, tableFacts } from './migration-guard.js';
import { MigrationTurn, TurnWaitStopped } from './migration-turn.js';

/** How long a migration that keeps meeting another process's work is tried again. */
const RAN_ELSEWHERE_MS = 60_000;

/**
 * The `created_at` of the last migration `database` recorded, 0 when none (or no such database):
 * every migration newer than it is pending. A migration is recorded after its statements ran.
 */
export async function lastRecordedMigration(conn: mysql.Connection, database: string): Promise<number> {
  try {
    const table = `\`${database.replaceAll('`', '``')}\`.\`${MIGRATIONS_TABLE}\``;
    const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT MAX(created_at) AS last FROM ${table}`);
    return Number(rows[0]?.last ?? 0);
  } catch (error) {
    if (isNoSuchTable(error)) return 0;
    throw error;
  }
}

/**
 * The tables punctual's migrations create (besides its own punctual_migrations and
 * punctual_migration_turn), all under the `punctual_` prefix so that they never meet a shop's
 * `tasks`, `members` or `audit_log` in the shop's database.
 */
export const OWN_TABLES = [tasks, taskTags, typeControls, members, shardLeases, taskRuns, auditLog, limitSlots, meta].map((table) =>
  getTableName(table),
);

/**
 * A database punctual has never migrated that holds tables by the names of punctual's own: a
 * shop's. The first migration would meet them; they are named at once instead, and nothing is touched.
 */
export class TableCollision extends Error {
  override name = 'TableCollision';

  constructor(
    readonly database: string,
    readonly tables: readonly string[],
  ) {
    super(
      `the database ${database} already has tables named like punctual's own: ${tables.join(', ')}; punctual did not make them ` +
        '(it has no migrations recorded there) and leaves them as they are: give punctual a database of its own in DATABASE_URL',
    );
  }
}

/** The process stops: the migrations ended between two statements, and the next start goes on from there. */
export class MigrationStopped extends Error {
  override name = 'MigrationStopped';
}

/** The database user may not change the schema, and migrations are pending. */
export class MigrationNotPermitted extends Error {
  override name = 'MigrationNotPermitted';

  constructor(
    readonly database: string,
    readonly pending: readonly string[],
    denied: string,
  ) {
    super(
      `${pending.length} migration(s) are pending on ${database} (${pending.join(', ')}) and this database user may not apply them ` +
        `(${denied}): run \`punctual migrate\` as a user with the migrating grants (docs/production.md#database-users), then start again`,
    );
  }
}

/** The turn was taken over while this process held it (its renewals stopped too long): start again. */
class TurnLost extends Error {
  override name = 'TurnLost';
}

/** Access denied to a table, a database or a privilege. */
const ACCESS_DENIED = new Set([1044, 1142, 1143, 1227]);

function isAccessDenied(error: unknown): boolean {
  const errno = (error as { errno?: number }).errno;
  return errno !== undefined && ACCESS_DENIED.has(errno);
}

/** Of punctual's table names, those `database` holds: [] when there are none. */
async function collidingTables(conn: mysql.Connection, database: string): Promise<string[]> {
  const [rows] = await conn.query<mysql.RowDataPacket[]>(
    'SELECT table_name AS name FROM information_schema.TABLES WHERE table_schema = ? AND table_name IN (?) ORDER BY 1',
    [database, OWN_TABLES],
  );
  return rows.map((row) => String(row.name));
}

/** What a migrated database holds, as the statements must address it. */
export interface MigratedDatabase {
  /**
   * `punctual_tasks` is a view over the previous release's `tasks` (migration 0020 on a database
   * 0.1.0 migrated, until the release that renames the tables): no index may be named through it.
   */
  tasksThroughView: boolean;
}

/** Whether `database`'s punctual_tasks is a view (0020's, over 0.1.0's `tasks`) rather than a table. */
async function tasksThroughView(conn: mysql.Connection, database: string): Promise<boolean> {
  const [rows] = await conn.query<mysql.RowDataPacket[]>(
    "SELECT table_type AS type FROM information_schema.TABLES WHERE table_schema = ? AND table_name = 'punctual_tasks'",
    [database],
  );
  return rows[0]?.type === 'VIEW';
}

export interface MigrateOptions {
  /** Where each migration applied, each wait and each stop is told. */
  log?: Logger;
  /** Aborted when the process stops: the work ends between two statements. */
  signal?: AbortSignal;
}

/** The text sent for statement `index` of `migration`: named, so a process list shows what runs. */
export function labelled(migration: Migration, index: number, sql: string): string {
  return `/* punctual ${migration.tag} ${index + 1}/${migration.statements.length} */ ${sql}`;
}

/** Runs `migration`'s statements where their effect is missing, then records it. */
async function apply(conn: mysql.Connection, migration: Migration, turn: MigrationTurn, options: MigrateOptions): Promise<void> {
  const started = performance.now();
  let skipped = 0;
  for (const [index, statement] of migration.parsed.entries()) {
    if (options.signal?.aborted === true) {
      options.log?.info(
        { migration: migration.tag, statementsDone: index, statements: migration.statements.length },
        'migration stopped between two statements: the next start finishes it',
      );
      throw new MigrationStopped(`stopped during migration ${migration.tag}, after ${index} of ${migration.statements.length} statements`);
    }
    if (turn.lost) throw new TurnLost(`the migration turn was taken over during ${migration.tag}`);
    const sql = await pendingSql(conn, statement);
    if (sql === undefined) skipped++;
    else await conn.query(labelled(migration, index, sql));
  }
  await conn.query(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES (?, ?)`, [migration.hash, migration.when]);
  options.log?.info(
    { migration: migration.tag, ms: Math.round(performance.now() - started), statements: migration.statements.length, skipped },
    'migration applied',
  );
}

export async function migrateDatabase(
  url: string,
  databaseName: string,
  access?: DatabaseAccess,
  options: MigrateOptions = {},
): Promise<MigratedDatabase> {
  const lockName = `punctual.migrate.${databaseName}`.slice(0, 64);
  const holder = `${hostname().slice(0, 60)}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const fresh = freshConnections(url, { timezone: 'Z' }, undefined, access);
  /** The turn taken, what the last holder left undone is applied. */
  const applyPending = async (conn: mysql.Connection, migrations: Migration[]) => {
    const turn = await MigrationTurn.take(conn, {
      name: lockName,
      holder,
      log: options.log,
      signal: options.signal,
      connect: () => connectFirst(url, { timezone: 'Z' }, undefined, access),
    });
    try {
      // No migrations table yet (punctual makes it before its first statement): whatever bears
      // punctual's names is someone else's. With the table, they are a first start's, cut short.
      if (!(await tableFacts(conn, MIGRATIONS_TABLE)).exists) {
        const taken = await collidingTables(conn, databaseName);
        if (taken.length > 0) throw new TableCollision(databaseName, taken);
        await conn.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
      }
      // What the last holder of the turn (a `punctual migrate` meanwhile) finished is not run again.
      const last = await lastRecordedMigration(conn, databaseName);
      for (const migration of migrations.filter((pending) => pending.when > last)) await apply(conn, migration, turn, options);
    } finally {
      await turn.end();
    }
  };
  const migrateOnce = () =>
    fresh.withConnection(async (conn) => {
      const last = await lastRecordedMigration(conn, databaseName);
      if (last >= newestMigration()) return { tasksThroughView: await tasksThroughView(conn, databaseName) };
      await conn.query(DB.utcSession);
      const [[server]] = await conn.query<mysql.RowDataPacket[]>(DB.version);
      const migrations = readMigrations(String(server?.version));
      const pending = migrations.filter((migration) => migration.when > last).map((migration) => migration.tag);
      options.log?.info({ pending }, 'migrating');
      try {
        await applyPending(conn, migrations);
      } catch (error) {
        if (error instanceof TurnWaitStopped) throw new MigrationStopped(error.message);
        if (isAccessDenied(error)) throw new MigrationNotPermitted(databaseName, pending, rootMessage(error));
        throw error;
      }
      return { tasksThroughView: await tasksThroughView(conn, databaseName) };
    });
  return retrying(migrateOnce, {
    // A statement that met another process's work (the turn lost, or a dead holder's statement
    // still finishing on the server), or a lock conflict: the guards skip it the next time.
    retryable: (error) => error instanceof TurnLost || isRanElsewhere(error) || isLockConflict(error),
    tries: Infinity,
    delayMs: () => 500,
    signal: AbortSignal.any([AbortSignal.timeout(RAN_ELSEWHERE_MS), ...(options.signal === undefined ? [] : [options.signal])]),
    onRetry: (error) => options.log?.warn({ error: rootMessage(error) }, "a migration met another process's work; trying again"),
  });
}

/** One migration as `punctual migrate --status` lists it. */
export interface MigrationState {
  tag: string;
  applied: boolean;
}

/** Each migration of this release, applied or pending on `databaseName`, and how many recorded ones this release does not know (a newer release's). */
export async function migrationStatus(
  url: string,
  databaseName: string,
  access?: DatabaseAccess,
): Promise<{ migrations: MigrationState[]; unknown: number }> {
  return freshConnections(url, { timezone: 'Z' }, '/', access).withConnection(async (conn) => {
    const journal = migrationJournal();
    let recorded: number[] = [];
    try {
      const table = `\`${databaseName.replaceAll('`', '``')}\`.\`${MIGRATIONS_TABLE}\``;
      const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT created_at AS at FROM ${table}`);
      recorded = rows.map((row) => Number(row.at));
    } catch (error) {
      if (!isNoSuchTable(error) && (error as { errno?: number }).errno !== 1049) throw error;
    }
    const last = Math.max(0, ...recorded);
    const known = new Set(journal.map((entry) => entry.when));
    return {
      migrations: journal.map((entry) => ({ tag: entry.tag, applied: entry.when <= last })),
      unknown: recorded.filter((at) => !known.has(at)).length,
    };
  });
}
