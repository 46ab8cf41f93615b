/**
 * Applies the migrations in drizzle/ at boot. A named lock (GET_LOCK) makes two processes that
 * boot at once take turns: the second finds the work done and applies nothing.
 *
 * On a Galera cluster GET_LOCK holds on one node only: two processes booting at once through two
 * nodes may both start a migration. Galera runs DDL in the same order on every node, so the
 * second meets "table exists" (or "duplicate column/key") at the first statement the first
 * process already ran; the transaction runner then waits and starts again on a fresh connection
 * (retry.ts, ranElsewhere), until it finds the migrations recorded. Every table has a primary key
 * (Galera replicates only those rows safely) and nothing uses LOCK TABLES.
 *
 * The work is autocommit: DDL commits by itself, and drizzle's migrator brackets its own writes.
 */
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate } from 'drizzle-orm/mysql2/migrator';
import type mysql from 'mysql2/promise';
import { freshConnections } from './connection.js';
import type { DatabaseAccess } from './tls.js';
import { ranElsewhere } from './retry.js';
import { DB } from './sql.js';
import { autocommit } from './transaction.js';

/** drizzle/ sits two levels above this file both in src/db and in dist/db. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));
export const MIGRATIONS_TABLE = 'punctual_migrations';
const LOCK_WAIT_S = 60;

export async function migrateDatabase(url: string, databaseName: string, access?: DatabaseAccess): Promise<void> {
  const lockName = `punctual.migrate.${databaseName}`.slice(0, 64);
  await autocommit(
    freshConnections(url, { timezone: 'Z' }, undefined, access),
    async (conn) => {
      await conn.query(DB.utcSession);
      const [rows] = await conn.query<mysql.RowDataPacket[]>(DB.getLock, [lockName, LOCK_WAIT_S]);
      if (rows[0]?.got !== 1) {
        throw new Error(`another process held the migration lock ${lockName} for ${LOCK_WAIT_S} s`);
      }
      try {
        await migrate(drizzle({ client: conn }), { migrationsFolder: MIGRATIONS_FOLDER, migrationsTable: MIGRATIONS_TABLE });
      } finally {
        await conn.query(DB.releaseLock, [lockName]);
      }
    },
    { retry: ranElsewhere(LOCK_WAIT_S * 1000) },
  );
}
