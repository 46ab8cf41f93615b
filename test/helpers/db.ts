/**
 * A database of the test's own (punctual_test_<label>_<epoch s>_<random>), migrated, and dropped
 * afterwards. Test connections always set their session to UTC, like the service's.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { dropDatabase, ensureDatabase } from '../../src/db/connection.js';
import { migrateDatabase } from '../../src/db/migrate.js';

/** The server the tests use; the tests never touch a database they did not create. */
export const SERVER_URL = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';
/** Databases of crashed runs older than this are dropped by the next run. */
export const STALE_AFTER_S = 3600;

export function testDatabaseAge(name: string): number | undefined {
  const match = /^punctual_test_\w+?_(\d{10})_[0-9a-f]+$/.exec(name);
  return match === null ? undefined : Date.now() / 1000 - Number(match[1]);
}

export interface TestDatabase {
  name: string;
  url: string;
  pool: mysql.Pool;
  query<T extends mysql.RowDataPacket[]>(sql: string, values?: unknown[]): Promise<T>;
  execute(sql: string, values?: unknown[]): Promise<mysql.ResultSetHeader>;
  drop(): Promise<void>;
}

/**
 * `create: false` only picks the name: the service under test must create the database itself.
 */
export async function createTestDatabase(label: string, options: { create?: boolean } = {}): Promise<TestDatabase> {
  const name = `punctual_test_${label.replace(/\W/g, '_')}_${Math.floor(Date.now() / 1000)}_${randomBytes(3).toString('hex')}`;
  const url = `${SERVER_URL.replace(/\/$/, '')}/${name}`;
  if (options.create !== false) {
    await ensureDatabase(url, name);
    await migrateDatabase(url, name);
  }
  const pool = mysql.createPool({ uri: url, timezone: 'Z', connectionLimit: 8 });
  pool.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => undefined));
  return {
    name,
    url,
    pool,
    async query<T extends mysql.RowDataPacket[]>(sql: string, values?: unknown[]) {
      const [rows] = await pool.query<T>(sql, values);
      return rows;
    },
    async execute(sql: string, values?: unknown[]) {
      const [result] = await pool.query<mysql.ResultSetHeader>(sql, values);
      return result;
    },
    async drop() {
      await pool.end().catch(() => undefined);
      await dropDatabase(url, name);
    },
  };
}
