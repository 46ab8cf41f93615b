/**
 * The migration to exact keys, tags and type names (drizzle/0007_exact_names.sql) on a database
 * that already has rows: the rows stay, and afterwards names that differ only in case or in a
 * trailing space are distinct. And the copy of the migrations MySQL 8 runs names its collation.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/mysql2';
import { migrate } from 'drizzle-orm/mysql2/migrator';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../src/db/connection.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { MIGRATIONS_FOLDER, MIGRATIONS_TABLE, MYSQL_EXACT_COLLATION, readMigrations } from '../../src/db/migration-files.js';
import { EXACT_COLLATION } from '../../src/db/schema.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const MIGRATION = '0007_exact_names';

let db: TestDatabase;
let before: string;

beforeAll(async () => {
  db = await createTestDatabase('migrate_exact', { create: false });
  // The migrations as they were before this one.
  before = mkdtempSync(join(tmpdir(), 'punctual-before-'));
  cpSync(MIGRATIONS_FOLDER, before, { recursive: true });
  // This one and those after it are left out: drizzle's migrator applies only migrations newer
  // than the last one applied, so a later one already applied would hide this one.
  const journalPath = join(before, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
  const at = journal.entries.findIndex((entry: { tag: string }) => entry.tag === MIGRATION);
  for (const entry of journal.entries.slice(at)) rmSync(join(before, `${entry.tag}.sql`));
  journal.entries = journal.entries.slice(0, at);
  writeFileSync(journalPath, JSON.stringify(journal));
});

afterAll(async () => {
  rmSync(before, { recursive: true, force: true });
  await db?.drop();
});

const collations = () =>
  db.query<any[]>(
    `SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME) AS col, COLLATION_NAME AS collation FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = DATABASE() AND ((TABLE_NAME = 'punctual_tasks' AND COLUMN_NAME IN ('task_key', 'type'))
       OR (TABLE_NAME = 'punctual_task_tags' AND COLUMN_NAME = 'tag') OR (TABLE_NAME = 'punctual_type_controls' AND COLUMN_NAME = 'type'))
`,
  );

describe('the migration to exact names', () => {
  it('keeps the rows of an existing database and makes case and trailing spaces count', async () => {
    await ensureDatabase(db.url, db.name);
    const conn = await mysql.createConnection({ uri: db.url });
    try {
      await migrate(drizzle({ client: conn }), { migrationsFolder: before, migrationsTable: MIGRATIONS_TABLE });
    } finally {
      await conn.end();
    }
    const { insertId } = await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, task_key, tags) VALUES ('close_order', '{}', UTC_TIMESTAMP(3), 'pad:1', '[\"sale\"]')",
    );
    await db.execute("INSERT INTO punctual_task_tags (task_id, tag) VALUES (?, 'sale')", [insertId]);
    await db.execute("INSERT INTO punctual_type_controls (type, paused) VALUES ('Webhook', 1)");
    // The old schema: the same key with a trailing space, the same tag and type in another case, are refused.
    await expect(db.execute("INSERT INTO punctual_task_tags (task_id, tag) VALUES (?, 'SALE')", [insertId])).rejects.toThrow(/Duplicate/);
    await expect(
      db.execute("INSERT INTO punctual_tasks (type, payload, run_at, task_key) VALUES ('close_order', '{}', UTC_TIMESTAMP(3), 'pad:1 ')"),
    ).rejects.toThrow(/Duplicate/);

    await migrateDatabase(db.url, db.name);

    expect((await collations()).map((row) => [row.col, row.collation]).sort()).toEqual([
      ['punctual_task_tags.tag', EXACT_COLLATION],
      ['punctual_tasks.task_key', EXACT_COLLATION],
      ['punctual_tasks.type', EXACT_COLLATION],
      ['punctual_type_controls.type', EXACT_COLLATION],
    ]);
    const [kept] = await db.query<any[]>('SELECT task_key, type FROM punctual_tasks WHERE id = ?', [insertId]);
    expect(kept).toEqual({ task_key: 'pad:1', type: 'close_order' });
    expect(await db.query<any[]>('SELECT tag FROM punctual_task_tags')).toEqual([{ tag: 'sale' }]);
    expect(await db.query<any[]>('SELECT type, paused FROM punctual_type_controls')).toEqual([{ type: 'Webhook', paused: 1 }]);
    await db.execute("INSERT INTO punctual_task_tags (task_id, tag) VALUES (?, 'SALE')", [insertId]);
    await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, task_key) VALUES ('close_order', '{}', UTC_TIMESTAMP(3), 'pad:1 ')",
    );
    await db.execute("INSERT INTO punctual_type_controls (type, paused) VALUES ('webhook', 0)");
    expect(await db.query<any[]>("SELECT id FROM punctual_tasks WHERE task_key = 'pad:1'")).toEqual([{ id: insertId }]);
    expect(await db.query<any[]>("SELECT type FROM punctual_type_controls WHERE type = 'webhook'")).toEqual([{ type: 'webhook' }]);
  });

  it("runs on MySQL 8 naming MySQL's collation, on MariaDB as the files are", () => {
    const statementsOf = (version: string) =>
      readMigrations(version)
        .find((migration) => migration.tag === MIGRATION)!
        .statements.join('\n');
    const maria = statementsOf('10.11.19-MariaDB-0+deb12u1');
    expect(maria).toContain(`COLLATE ${EXACT_COLLATION}`);
    const mysql8 = statementsOf('8.0.36');
    expect(mysql8).toContain(`COLLATE ${MYSQL_EXACT_COLLATION}`);
    expect(mysql8).not.toContain(EXACT_COLLATION);
    expect(readMigrations('8.0.36').map((migration) => migration.tag)).toEqual(readMigrations('10.11').map((migration) => migration.tag));
  });
});
