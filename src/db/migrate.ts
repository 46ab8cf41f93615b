/**
 * Applies the migrations in drizzle/ at boot, under a named lock (GET_LOCK), so two processes that
 * boot at once take turns. On Galera the lock holds on one node only: the second process meets
 * "table exists" at a statement the first already ran, and the transaction runner waits and starts
 * again (retry.ts, ranElsewhere) until it finds the migrations recorded. The work is autocommit.
 * See docs/architecture.md#migrations.
 */
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate } from 'drizzle-orm/mysql2/migrator';
import type mysql from 'mysql2/promise';
import { freshConnections } from './connection.js';
import { ranElsewhere } from './retry.js';
import { DB } from './sql.js';
import { autocommit } from './transaction.js';

/** drizzle/ sits two levels above this file both in src/db and in dist/db. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));
export const MIGRATIONS_TABLE = 'punctual_migrations';
const LOCK_WAIT_S = 60;

export async function migrateDatabase(url: string, databaseName: string): Promise<void> {
  const lockName = `punctual.migrate.${databaseName}`.slice(0, 64);
  await autocommit(
    freshConnections(url, { timezone: 'Z' }),
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
