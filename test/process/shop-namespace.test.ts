/**
 * punctual in a shop's database that has tables of its own by every name punctual's tables had
 * before the `punctual_` prefix (tasks, members, audit_log, …), with the shop's rows in them: the
 * server starts, migrates, creates and runs tasks in `punctual_*` tables, and leaves the shop's
 * tables as they were, rows and definitions alike. No view is made: those are only for a
 * database the previous release migrated.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../src/db/connection.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTasks, startServer, waitFor } from '../helpers/server.js';
import { countStatus, createShop, insertOrders, makeOrders } from '../helpers/shop.js';

const OLD_NAMES = ['audit_log', 'limit_slots', 'members', 'shard_leases', 'task_runs', 'task_tags', 'tasks', 'type_controls'];
const orders = makeOrders(50, 20, 'NS');
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('shop_namespace', { create: false });
});

afterAll(async () => {
  await db?.drop();
});

/** Each of the shop's tables: its CREATE TABLE and its rows. */
async function shopTables(): Promise<Record<string, { create: string; rows: unknown[] }>> {
  const tables: Record<string, { create: string; rows: unknown[] }> = {};
  for (const name of OLD_NAMES) {
    const [created] = await db.query<mysql.RowDataPacket[]>(`SHOW CREATE TABLE \`${name}\``);
    tables[name] = {
      create: String(created?.['Create Table']),
      rows: await db.query<mysql.RowDataPacket[]>(`SELECT * FROM \`${name}\` ORDER BY id`),
    };
  }
  return tables;
}

describe("a shop's own tables by punctual's former names", () => {
  it('stay as they were while punctual migrates, creates and runs tasks in its punctual_ tables', async () => {
    await ensureDatabase(db.url, db.name);
    for (const name of OLD_NAMES) {
      await db.execute(`CREATE TABLE \`${name}\` (id INT PRIMARY KEY, title VARCHAR(100) NOT NULL, status VARCHAR(20) NULL)`);
      await db.execute(`INSERT INTO \`${name}\` VALUES (1, 'the shop''s ${name}', 'pending'), (2, 'another', NULL)`);
    }
    const before = await shopTables();

    const server = await startServer({ env: { DATABASE_URL: db.url } });
    try {
      // The orders the tasks close, and the ledger's trigger on punctual_tasks, which is there now.
      await createShop(db);
      await insertOrders(db, orders);
      const due = Date.now() + 1000;
      const ids = await createTasks(
        server,
        orders.map((order, i) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: due + i * 10, key: order.orderSn })),
      );
      await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 20_000, 'every task to run');
      const [closed] = await db.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM orders WHERE status = 'closed'");
      expect(Number(closed?.n)).toBe(orders.length);
      // Each run on record in punctual_* (a successful one in its task's row).
      const runs = await db.query<mysql.RowDataPacket[]>(
        'SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND done_by IS NOT NULL AND id NOT IN (SELECT task_id FROM punctual_task_runs)',
        [ids],
      );
      expect(Number(runs[0]?.n)).toBe(ids.length);
    } finally {
      expect(await server.stop()).toBe(0);
    }

    expect(await shopTables()).toEqual(before);
    const tables = await db.query<mysql.RowDataPacket[]>(
      'SELECT table_name AS name, table_type AS type FROM information_schema.TABLES WHERE table_schema = ? ORDER BY 1',
      [db.name],
    );
    const punctuals = tables
      .map((row) => `${String(row.name)} ${String(row.type)}`)
      .filter((row) => row.startsWith('punctual_'))
      .sort();
    expect(punctuals).toEqual(
      [...OLD_NAMES.map((name) => `punctual_${name}`), 'punctual_meta', 'punctual_migration_turn', 'punctual_migrations']
        .sort()
        .map((name) => `${name} BASE TABLE`),
    );
  });
});
