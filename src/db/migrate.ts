/**
 * Applies the migrations in drizzle/ at boot, under a named lock (GET_LOCK), so two processes that
 * boot at once take turns. On Galera that lock holds on one node only, so a turn is also a row of
 * punctual_migration_turn, inserted before and deleted after (an insert on a second node fails as
 * a duplicate or a certification conflict, and waits): two nodes never migrate at once. Without
 * it a migration that can run twice (0007 changes collations) was recorded twice. A process that
 * still meets a statement another ran (a turn taken over after its time ran out) waits and starts
 * again (retry.ts, ranElsewhere) until it finds the migrations recorded. The work is autocommit.
 * On MySQL 8 the files run with MariaDB's NO PAD collation name replaced by MySQL's. A database
 * that has recorded the newest migration already (every start but the first after an upgrade) is
 * left as it is after one query, without the lock, the turn or reading the files: drizzle's own
 * test (a migration runs when it is newer than the last one recorded) would run nothing.
 * See docs/architecture.md#migrations.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate } from 'drizzle-orm/mysql2/migrator';
import type mysql from 'mysql2/promise';
import { freshConnections } from './connection.js';
import type { DatabaseAccess } from './tls.js';
import { isDuplicateKey, isLockConflict, isNoSuchTable } from './errors.js';
import { ranElsewhere } from './retry.js';
import { DB } from './sql.js';
import { getTableName } from 'drizzle-orm';
import { auditLog, EXACT_COLLATION, limitSlots, members, shardLeases, taskRuns, tasks, taskTags, typeControls } from './schema.js';
import { autocommit } from './transaction.js';

/** drizzle/ sits two levels above this file both in src/db and in dist/db. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));
export const MIGRATIONS_TABLE = 'punctual_migrations';
const LOCK_WAIT_S = 60;
/** A turn row older than this is taken to be a dead process's. */
const TURN_S = 300;
const TURN_RETRY_MS = 200;

/** Inserts the turn row `name`, waiting while another process holds it (up to LOCK_WAIT_S). */
async function takeTurn(conn: mysql.Connection, name: string, holder: string): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_S * 1000;
  await conn.query(DB.createTurns);
  for (;;) {
    await conn.query(DB.dropStaleTurn, [name]);
    try {
      await conn.query(DB.takeTurn, [name, holder, TURN_S]);
      return;
    } catch (error) {
      if (!isDuplicateKey(error) && !isLockConflict(error)) throw error;
    }
    if (Date.now() > deadline) throw new Error(`another process held the migration turn ${name} for ${LOCK_WAIT_S} s`);
    await new Promise((resolve) => setTimeout(resolve, TURN_RETRY_MS));
  }
}

/** MySQL 8's name for a binary NO PAD utf8mb4 collation (MariaDB's is EXACT_COLLATION). */
export const MYSQL_EXACT_COLLATION = 'utf8mb4_0900_bin';

/** The binary NO PAD collation's name on the server that answered `version` to SELECT VERSION(). */
export function exactCollationFor(version: string): string {
  return /mariadb/i.test(version) ? EXACT_COLLATION : MYSQL_EXACT_COLLATION;
}

/**
 * A folder of the migrations as `version`'s server must run them: drizzle/ itself on MariaDB, a
 * copy with the collation's name replaced elsewhere (`done` removes the copy). The journal is
 * the same, so both servers record the same migrations in the same order.
 */
export function migrationsFor(version: string, folder = MIGRATIONS_FOLDER): { folder: string; done: () => void } {
  const collation = exactCollationFor(version);
  if (collation === EXACT_COLLATION) return { folder, done: () => undefined };
  const copy = mkdtempSync(join(tmpdir(), 'punctual-migrations-'));
  cpSync(folder, copy, { recursive: true });
  for (const file of readdirSync(copy).filter((name) => name.endsWith('.sql'))) {
    const path = join(copy, file);
    writeFileSync(path, readFileSync(path, 'utf8').replaceAll(EXACT_COLLATION, collation));
  }
  return { folder: copy, done: () => rmSync(copy, { recursive: true, force: true }) };
}

/** drizzle's journal: each migration's file (`tag`) and instant (`when`, what it records as `created_at` once applied). */
export function migrationJournal(folder = MIGRATIONS_FOLDER): { when: number; tag: string }[] {
  return (JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: { when: number; tag: string }[] }).entries;
}

/**
 * The `created_at` of the last migration `database` recorded, 0 when none (or no such database):
 * drizzle runs each migration newer than it. A migration is recorded after its statements ran.
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
export const OWN_TABLES = [tasks, taskTags, typeControls, members, shardLeases, taskRuns, auditLog, limitSlots].map((table) =>
  getTableName(table),
);

/**
 * A database punctual has never migrated that holds tables by the names of punctual's own: a
 * shop's. The first migration would meet them (and wait for the migration lock's 60 s, taking
 * them for another process's work); they are named at once instead, and nothing is touched.
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

export async function migrateDatabase(url: string, databaseName: string, access?: DatabaseAccess): Promise<MigratedDatabase> {
  const lockName = `punctual.migrate.${databaseName}`.slice(0, 64);
  return autocommit(
    freshConnections(url, { timezone: 'Z' }, undefined, access),
    async (conn) => {
      const newest = Math.max(0, ...migrationJournal().map((entry) => entry.when));
      if ((await lastRecordedMigration(conn, databaseName)) >= newest)
        return { tasksThroughView: await tasksThroughView(conn, databaseName) };
      await conn.query(DB.utcSession);
      const [rows] = await conn.query<mysql.RowDataPacket[]>(DB.getLock, [lockName, LOCK_WAIT_S]);
      if (rows[0]?.got !== 1) {
        throw new Error(`another process held the migration lock ${lockName} for ${LOCK_WAIT_S} s`);
      }
      const holder = randomUUID();
      try {
        await takeTurn(conn, lockName, holder);
        // Nothing recorded yet, with the turn taken (no other process is migrating it now, on any
        // node): whatever bears punctual's names is someone else's.
        if ((await lastRecordedMigration(conn, databaseName)) === 0) {
          const taken = await collidingTables(conn, databaseName);
          if (taken.length > 0) {
            await conn.query(DB.endTurn, [lockName, holder]);
            throw new TableCollision(databaseName, taken);
          }
        }
        const [server] = await conn.query<mysql.RowDataPacket[]>(DB.version);
        const migrations = migrationsFor(String(server[0]?.version));
        try {
          await migrate(drizzle({ client: conn }), { migrationsFolder: migrations.folder, migrationsTable: MIGRATIONS_TABLE });
        } finally {
          migrations.done();
          await conn.query(DB.endTurn, [lockName, holder]);
        }
      } finally {
        await conn.query(DB.releaseLock, [lockName]);
      }
      return { tasksThroughView: await tasksThroughView(conn, databaseName) };
    },
    { retry: ranElsewhere(LOCK_WAIT_S * 1000) },
  );
}
