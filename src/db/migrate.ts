/**
 * Applies the migrations in drizzle/ at boot. A named lock (GET_LOCK) makes two processes that
 * boot at once take turns: the second finds the work done and applies nothing.
 *
 * On a Galera cluster GET_LOCK holds on one node only: two processes booting at once through two
 * nodes may both start a migration. Galera runs DDL in the same order on every node, so the
 * second meets "table exists" (or "duplicate column/key") at the first statement the first
 * process already ran; it then waits and starts again, until it finds the migrations recorded.
 * Every table has a primary key (Galera replicates only those rows safely) and nothing uses
 * LOCK TABLES.
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
/** Table exists, duplicate column, duplicate key name, duplicate foreign key, duplicate entry. */
const RAN_ELSEWHERE = new Set([1050, 1060, 1061, 1826, 1062]);
const RAN_ELSEWHERE_WAIT_MS = 500;

export async function migrateDatabase(url: string, databaseName: string): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_S * 1000;
  for (;;) {
    try {
      return await migrateOnce(url, databaseName);
    } catch (error) {
      const errno =
        (error as { errno?: number; cause?: { errno?: number } }).errno ?? (error as { cause?: { errno?: number } }).cause?.errno;
      if (errno === undefined || !RAN_ELSEWHERE.has(errno) || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, RAN_ELSEWHERE_WAIT_MS));
    }
  }
}

async function migrateOnce(url: string, databaseName: string): Promise<void> {
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
