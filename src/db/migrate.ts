/**
 * Applies the migrations in drizzle/ at boot. A named lock (GET_LOCK) makes two processes that
 * boot at once take turns: the second finds the work done and applies nothing.
 */
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate } from 'drizzle-orm/mysql2/migrator';
import type mysql from 'mysql2/promise';
import { connectFirst } from './connection.js';

/** drizzle/ sits two levels above this file both in src/db and in dist/db. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));
export const MIGRATIONS_TABLE = 'punctual_migrations';
const LOCK_WAIT_S = 60;

export async function migrateDatabase(url: string, databaseName: string): Promise<void> {
  const conn = await connectFirst(url, { timezone: 'Z' });
  const lockName = `punctual.migrate.${databaseName}`.slice(0, 64);
  try {
    await conn.query(`SET time_zone = '+00:00'`);
    const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT GET_LOCK(?, ?) AS got', [lockName, LOCK_WAIT_S]);
    if (rows[0]?.got !== 1) {
      throw new Error(`another process held the migration lock ${lockName} for ${LOCK_WAIT_S} s`);
    }
    try {
      await migrate(drizzle({ client: conn }), { migrationsFolder: MIGRATIONS_FOLDER, migrationsTable: MIGRATIONS_TABLE });
    } finally {
      await conn.query('SELECT RELEASE_LOCK(?)', [lockName]);
    }
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}
