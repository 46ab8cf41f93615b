import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database, type InsertIds } from '../../src/db/connection.js';
import { TaskStore } from '../../src/store/task-store.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let database: Database;

beforeAll(async () => {
  db = await createTestDatabase('store');
  database = new Database({ url: db.url, poolSize: 6, lockWaitTimeoutS: 5 });
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

describe('intake', () => {
  it('asks the server how to learn the ids of a multi-row insert', async () => {
    // (runs first, before the next tests replace the answer)
    const [[row]] = await database.pool.query<any[]>('SELECT VERSION() AS v');
    expect(await database.insertIds()).toBe(String(row.v).includes('MariaDB') ? 'returning' : expect.any(String));
  });

  it.each(['returning', 'consecutive', 'one-by-one'] as InsertIds[])(
    'gives every create of a concurrent burst its own row and id (%s)',
    async (ids) => {
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
      const results = await Promise.all(burst.map((task) => store.insert(task, now)));
      const created = results.filter((result) => result.created);
      expect(created.length).toBe(120 - 30); // 40 keyed creates over 10 keys: 30 repeats
      expect(new Set(created.map((result) => result.task.id)).size).toBe(created.length);
      for (const { task } of created) {
        const [row] = await db.query<any[]>('SELECT payload, task_key FROM tasks WHERE id = ?', [task.id]);
        expect(typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload).toEqual(task.payload);
        expect(row.task_key).toBe(task.key);
      }
      for (const [i, result] of results.entries()) {
        if (result.created) continue;
        expect(result.task.key).toBe(burst[i]!.key);
        expect(result.task.payload).not.toEqual(burst[i]!.payload); // the first create's task
      }
    },
  );
});
