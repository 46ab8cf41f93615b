/**
 * The rule every file in drizzle/ must keep (docs/development.md#migrations-that-survive-a-kill):
 * each statement is one the migrator can guard, and a migration run again from its first
 * statement after a start was cut off behind any of its statements changes nothing that is done
 * and finishes what is not. Here, for every migration and every k, the statements up to k run
 * once, then again from the first on a new connection (what a start after a kill right behind
 * statement k does): the schema after the second pass must be the one after the first, and at the
 * end the database must read as a clean migration's. From an empty database and from one the
 * previous release migrated. test/process/migration-kills.test.ts kills real starts.
 */
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../src/db/connection.js';
import { labelled, migrateDatabase } from '../../src/db/migrate.js';
import { MIGRATIONS_TABLE, newestMigration, readMigrations, type Migration } from '../../src/db/migration-files.js';
import { parseMigrationStatement, pendingSql } from '../../src/db/migration-guard.js';
import { DB } from '../../src/db/sql.js';
import type { TestDatabase } from '../helpers/db.js';
import { databaseFor, type KillPath } from '../helpers/migration-kills.js';
import { releaseMigrations, releases } from '../helpers/release.js';
import { schemaSnapshot } from '../helpers/schema-snapshot.js';

const made: TestDatabase[] = [];

afterAll(async () => {
  for (const db of made) await db.drop();
});

async function database(path: KillPath, label: string): Promise<TestDatabase> {
  const db = await databaseFor(path, label);
  made.push(db);
  await ensureDatabase(db.url, db.name);
  return db;
}

/** Runs statements [0, count) of `migration` on a new connection, each where its effect is missing. */
async function runFirst(db: TestDatabase, migration: Migration, count: number): Promise<void> {
  const conn = await mysql.createConnection({ uri: db.url, timezone: 'Z' });
  try {
    await conn.query(DB.utcSession);
    for (let index = 0; index < count; index++) {
      const sql = await pendingSql(conn, migration.parsed[index]!);
      if (sql !== undefined) await conn.query(labelled(migration, index, sql));
    }
  } finally {
    await conn.end();
  }
}

describe('every migration statement met twice', () => {
  it('is a form the migrator guards (a file that is not fails to read, naming the statement)', () => {
    expect(readMigrations('10.11-MariaDB').flatMap((migration) => migration.parsed).length).toBeGreaterThan(100);
    expect(() => parseMigrationStatement('INSERT INTO punctual_tasks (type) VALUES (1)')).toThrow(/cannot make safe/);
    expect(() => parseMigrationStatement('ALTER TABLE `t` RENAME TO `u`')).toThrow(/cannot guard/);
  });

  it.each(['empty', 'previous release'] as const)(
    'from the %s: each migration cut off behind any statement is finished by running it again',
    async (path) => {
      const db = await database(path, 'migtwice');
      const conn = await mysql.createConnection({ uri: db.url });
      const after = path === 'empty' ? 0 : newestMigration(releaseMigrations(releases()[0]!));
      let checked = 0;
      try {
        await conn.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
        for (const migration of readMigrations('10.11-MariaDB').filter((m) => m.when > after)) {
          for (let k = 1; k <= migration.parsed.length; k++) {
            // A start that ran statements [0, k - 1) and was killed: the next one runs from the first.
            const before = await schemaSnapshot(conn, db.name);
            await runFirst(db, migration, k - 1);
            expect(await schemaSnapshot(conn, db.name), `${migration.tag}: statements 1-${k - 1} met again`).toEqual(before);
            await runFirst(db, migration, k);
            checked++;
          }
          // Killed after its last statement, before its record.
          const done = await schemaSnapshot(conn, db.name);
          await runFirst(db, migration, migration.parsed.length);
          expect(await schemaSnapshot(conn, db.name), `${migration.tag}: met again whole`).toEqual(done);
          await conn.query(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES (?, ?)`, [migration.hash, migration.when]);
        }
        const reference = await database(path, 'migtwice_ref');
        await migrateDatabase(reference.url, reference.name);
        expect(await schemaSnapshot(conn, db.name)).toEqual(await schemaSnapshot(reference.pool, reference.name));
        expect(checked).toBeGreaterThan(path === 'empty' ? 100 : 60);
      } finally {
        await conn.end();
      }
    },
    120_000,
  );
});
