import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../src/db/connection.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { MIGRATIONS_TABLE } from '../../src/db/migration-files.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('migrate', { create: false });
});

afterAll(async () => {
  await db?.drop();
});

describe('migrations', () => {
  it('let four processes booting at once take turns: each migration runs once', async () => {
    await ensureDatabase(db.url, db.name);
    await Promise.all([1, 2, 3, 4].map(() => migrateDatabase(db.url, db.name)));
    const applied = await db.query<any[]>(`SELECT hash FROM ${MIGRATIONS_TABLE}`);
    const files = await import('node:fs').then((fs) =>
      fs.readdirSync(new URL('../../drizzle', import.meta.url)).filter((f) => f.endsWith('.sql')),
    );
    expect(applied).toHaveLength(files.length);
    const tables = await db.query<any[]>('SHOW TABLES');
    expect(tables.map((row) => Object.values(row)[0]).sort()).toEqual([
      'punctual_audit_log',
      'punctual_limit_slots',
      'punctual_members',
      'punctual_meta',
      'punctual_migration_turn', // the turn a migrating process holds, across a Galera cluster too
      MIGRATIONS_TABLE,
      'punctual_shard_leases',
      'punctual_task_runs',
      'punctual_task_tags',
      'punctual_tasks',
      'punctual_type_controls',
    ]);
  });

  it("create only punctual's own tables, in utf8mb4 with case-sensitive keys", async () => {
    const [table] = await db.query<any[]>(
      "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'punctual_tasks'",
    );
    expect(table.TABLE_COLLATION).toBe('utf8mb4_bin');
    await db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at, task_key) VALUES ('close_order', '{}', UTC_TIMESTAMP(3), 'SN1'), ('close_order', '{}', UTC_TIMESTAMP(3), 'sn1')`,
    );
    const indexes = await db.query<any[]>("SHOW INDEX FROM punctual_tasks WHERE Key_name = 'tasks_status_run_at'");
    expect(indexes.map((row) => row.Column_name)).toEqual(['status', 'finished_at', 'run_at', 'id', 'priority']);
  });

  it('leave a database that recorded the newest migration after one look: no lock waited for, nothing run again', async () => {
    // Another process holds the migration lock (it is migrating, or hung): a start that needs
    // nothing returns without it. Had it asked for the lock, it would have waited 60 s and thrown.
    const lock = `punctual.migrate.${db.name}`.slice(0, 64);
    const holder = await db.pool.getConnection();
    try {
      const [[got]] = await holder.query<any[]>('SELECT GET_LOCK(?, 5) AS got', [lock]);
      expect(got.got).toBe(1);
      const before = await db.query<any[]>(`SELECT COUNT(*) AS n FROM ${MIGRATIONS_TABLE}`);
      await migrateDatabase(db.url, db.name);
      const after = await db.query<any[]>(`SELECT COUNT(*) AS n FROM ${MIGRATIONS_TABLE}`);
      expect(after[0].n).toBe(before[0].n);
    } finally {
      await holder.query('SELECT RELEASE_LOCK(?)', [lock]);
      holder.release();
    }
  }, 70_000);
});
