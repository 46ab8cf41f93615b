import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database, type InsertIds } from '../../src/db/connection.js';
import { TaskStore } from '../../src/store/task-store.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('store');
});

afterAll(async () => {
  await db?.drop();
});

/** A Database of the test's own, so no test sees another's replaced strategy, whatever the order. */
async function withDatabase<T>(fn: (database: Database) => Promise<T>): Promise<T> {
  const database = new Database({ url: db.url, poolSize: 6, lockWaitTimeoutS: 5 });
  try {
    return await fn(database);
  } finally {
    await database.close();
  }
}

describe('intake', () => {
  it('asks the server how to learn the ids of a multi-row insert', async () => {
    await withDatabase(async (database) => {
      const [[row]] = await database.pool.query<any[]>(
        'SELECT VERSION() AS v, @@innodb_autoinc_lock_mode AS mode, @@auto_increment_increment AS step',
      );
      // MariaDB 10.5+ answers INSERT … RETURNING; MySQL hands out consecutive ids only in lock modes 0-1 with a step of 1.
      const mariadb = /^(\d+)\.(\d+).*MariaDB/i.exec(String(row.v));
      const expected =
        mariadb !== null && Number(mariadb[1]) * 100 + Number(mariadb[2]) >= 1005
          ? 'returning'
          : Number(row.mode) <= 1 && Number(row.step) === 1
            ? 'consecutive'
            : 'one-by-one';
      expect(await database.insertIds()).toBe(expected);
    });
  });

  it.each(['returning', 'consecutive', 'one-by-one'] as InsertIds[])(
    'gives every create of a concurrent burst its own row and id (%s)',
    (ids) =>
      withDatabase(async (database) => {
        // The strategy this server would pick, replaced for this test.
        database.insertIds = async () => ids;
        const store = new TaskStore(database);
        const now = Date.now();
        const burst = Array.from({ length: 120 }, (_, i) => ({
          key: i % 3 === 0 ? `${ids}-key-${i % 30}` : null, // keys repeat: 0, 30, 60 and 90 share one
          type: 'close_order',
          payload: { orderSn: `${ids}-${i}` },
          runAt: now + 60_000 + i,
          timezone: 'UTC',
          maxAttempts: 4,
          misfire: 'run' as const,
          cron: null,
        }));
        const results = await Promise.all(burst.map((task) => store.changes.insert(task, now)));
        const created = results.filter((result) => result.created);
        expect(created.length).toBe(120 - 30); // 40 keyed creates over 10 keys: 30 repeats
        expect(new Set(created.map((result) => result.task.id)).size).toBe(created.length);
        for (const { task } of created) {
          const [row] = await db.query<any[]>('SELECT payload, task_key FROM punctual_tasks WHERE id = ?', [task.id]);
          expect(typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload).toEqual(task.payload);
          expect(row.task_key).toBe(task.key);
        }
        for (const [i, result] of results.entries()) {
          if (result.created) continue;
          expect(result.task.key).toBe(burst[i]!.key);
          expect(result.task.payload).not.toEqual(burst[i]!.payload); // the first create's task
        }
      }),
  );
});
