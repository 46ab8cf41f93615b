/**
 * A start killed (SIGKILL) right after one statement of its migrations, the way a deploy that gives
 * up, an OOM kill or a node restart cuts it: the built server runs against the database through a
 * proxy that reads its queries (helpers/proxy.ts) and, once the server has answered the chosen
 * statement, kills the process before the answer reaches it. The statement is done; its migration
 * is not recorded. Then a normal start must be ready within seconds and run a task.
 *
 * Kill points are counted in the order a first start sends the statements, so they are found by
 * their text whichever migrator sends them (the files as drizzle cut them, or this tree's, which
 * names each statement in a comment). Two paths: an empty database, and one the previous release
 * migrated (its own migrations, from its commit, applied as it applied them).
 *
 * KILL_MAIN names another build's dist/app/main.js to kill instead of this checkout's (an older
 * commit's, to see what it did): its own drizzle/ folder gives the statements.
 */
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate } from 'drizzle-orm/mysql2/migrator';
import mysql from 'mysql2/promise';
import { ensureDatabase } from '../../src/db/connection.js';
import { MIGRATIONS_TABLE, migrationJournal, newestMigration, readMigrations } from '../../src/db/migration-files.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { Proxy } from './proxy.js';
import { releaseMigrations, releases } from './release.js';
import { launchServer } from './server.js';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The build the kill tests start: this checkout's, or KILL_MAIN's. */
export const KILL_MAIN = process.env.KILL_MAIN ?? fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));
/** The migrations that build runs. */
const KILL_MIGRATIONS = join(dirname(KILL_MAIN), '..', '..', 'drizzle');

export type KillPath = 'empty' | 'previous release';

export interface KillPoint {
  path: KillPath;
  /** The statement's place among those a first start sends on this path (0-based). */
  index: number;
  migration: string;
  /** 1-based within its migration. */
  statement: number;
  statements: number;
}

/** A statement's text as a comparison sees it: no comment before it, no final semicolon, no surrounding space. */
export function comparable(sql: string): string {
  return sql
    .replace(/^\s*\/\*[^*]*\*\/\s*/, '')
    .split('\n')
    .filter((line) => !/^\s*--/.test(line))
    .join('\n')
    .trim()
    .replace(/;\s*$/, '')
    .trim();
}

/** The statements a first start sends on `path`, in order, each with its point. */
export function killPoints(path: KillPath): { point: KillPoint; text: string }[] {
  const after = path === 'empty' ? 0 : newestMigration(releaseMigrations(releases()[0]!));
  return readMigrations('10.11-MariaDB', KILL_MIGRATIONS)
    .filter((migration) => migration.when > after)
    .flatMap((migration) =>
      migration.statements.map((text, i) => ({
        text: comparable(text),
        point: { path, index: 0, migration: migration.tag, statement: i + 1, statements: migration.statements.length },
      })),
    )
    .map((entry, index) => ({ ...entry, point: { ...entry.point, index } }));
}

/** A database of the test's own on `path`'s starting point: empty, or as the previous release migrated it. */
export async function databaseFor(path: KillPath, label: string): Promise<TestDatabase> {
  const db = await createTestDatabase(label, { create: false });
  if (path === 'previous release') {
    await ensureDatabase(db.url, db.name);
    const conn = await mysql.createConnection({ uri: db.url });
    try {
      await migrate(drizzle({ client: conn }), { migrationsFolder: releaseMigrations(releases()[0]!), migrationsTable: MIGRATIONS_TABLE });
    } finally {
      await conn.end();
    }
  }
  return db;
}

/** Migrations this tree knows that `db` recorded. */
export async function recordedMigrations(db: TestDatabase): Promise<number> {
  const known = new Set(migrationJournal().map((entry) => entry.when));
  const rows = await db.query<mysql.RowDataPacket[]>(`SELECT created_at AS at FROM ${MIGRATIONS_TABLE}`);
  return rows.filter((row) => known.has(Number(row.at))).length;
}

/**
 * Starts the built server on `db` and kills it right after the server answered the statement at
 * `point`. Answers how it ended: killed there, or (a failure of the test) exited or ready first.
 */
export async function startKilledAt(
  db: TestDatabase,
  point: KillPoint,
  env: Record<string, string> = {},
): Promise<{ killed: boolean; exit: number | null; logs: string[] }> {
  const expected = killPoints(point.path).map((entry) => entry.text);
  let seen = 0;
  let killed = false;
  let kill: (() => void) | undefined;
  const proxy = await new Proxy({
    onQuery: (query) => {
      if (seen > point.index || comparable(query) !== expected[seen]) return undefined;
      seen++;
      if (seen <= point.index) return undefined;
      return () => {
        killed = true;
        kill?.();
        return 'drop';
      };
    },
  }).start();
  try {
    const server = launchServer({ env: { DATABASE_URL: proxy.url(db.name), ...env }, main: KILL_MAIN });
    kill = () => server.child.kill('SIGKILL');
    const outcome = await Promise.race([server.exited, server.ready.then(() => 'ready' as const)]);
    if (outcome === 'ready') {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    return {
      killed,
      exit: outcome === 'ready' ? null : outcome,
      logs: [...server.logs.map((line) => line.msg), ...server.stderr],
    };
  } finally {
    await proxy.stop();
  }
}
