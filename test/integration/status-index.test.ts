/**
 * One index for open and finished tasks, (status, finished_at, run_at, id, priority): the reads of
 * open tasks range over finished_at IS NULL and read about the rows they answer, as on a
 * (status, run_at) index; the pages of finished tasks come newest first from it without a sort of
 * the status's rows. Counted with the session's `Handler_read_*` counters on a pool of one
 * connection. And an open task written with a finished_at (by hand: punctual never writes one) is
 * mended at the start, so it still runs. Bulk changes by type pick their chunks from the type's
 * (type, status, run_minute, run_at) index, the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { TaskStore } from '../../src/store/task-store.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const NOW = Date.UTC(2031, 2, 4, 9, 15, 0);
const ROWS = 4000;

let db: TestDatabase;
let database: Database;
let store: TaskStore;

const at = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

/** Rows read by the pool's one connection so far (index dives and steps, and full scans). */
async function rowsRead(): Promise<number> {
  const [rows] = await database.pool.query<any[]>("SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%'");
  return rows.reduce((sum: number, row: any) => sum + Number(row.Value), 0);
}

async function measured<T>(fn: () => Promise<T>): Promise<{ result: T; read: number }> {
  const before = await rowsRead();
  const result = await fn();
  return { result, read: (await rowsRead()) - before };
}

beforeAll(async () => {
  db = await createTestDatabase('status_index');
  database = new Database({ url: db.url, poolSize: 1, lockWaitTimeoutS: 5 });
  store = new TaskStore(database);
  // Around NOW, 10 ms apart: ROWS pending tasks (half due), and ROWS done tasks that finished
  // over the hour before, which no read of open tasks may count.
  const rows: unknown[][] = [];
  for (let i = 0; i < ROWS; i++) {
    const runAt = NOW - (ROWS / 2) * 10 + i * 10;
    rows.push([at(runAt), 'pending', null], [at(runAt), 'done', at(NOW - 3_600_000 + i * 900)]);
  }
  for (let start = 0; start < rows.length; start += 2000) {
    const chunk = rows.slice(start, start + 2000);
    await db.pool.query(
      `INSERT INTO punctual_tasks (type, payload, run_at, status, finished_at) VALUES ${chunk.map(() => "('close_order', '{}', ?, ?, ?)").join(', ')}`,
      chunk.flat(),
    );
  }
  await db.pool.query('ANALYZE TABLE punctual_tasks');
}, 120_000);

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

describe('the (status, finished_at, run_at, id, priority) index', () => {
  it('replaces the (status, run_at) and (status, finished_at) indexes: one index of tasks that holds status fewer', async () => {
    const indexes = await db.query<any[]>(
      "SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = ? AND table_name = 'punctual_tasks' AND column_name = 'status'",
      [db.name],
    );
    expect(indexes.map((row) => row.index_name ?? row.INDEX_NAME).sort()).not.toContain('tasks_status_finished_at');
    // Bulk changes by type walk the (type, status, run_minute, run_at) index instead (migration 0023).
    expect(indexes.map((row) => row.index_name ?? row.INDEX_NAME).sort()).not.toContain('tasks_type_status');
  });

  it('a bulk change by type picks its chunks from the type index: about the rows it answers, either way, within a bound', async () => {
    const first = await measured(() => store.changes.pick({ type: 'close_order' }, 'pending', undefined, 100));
    expect(first.result.map((row) => row.id)).toHaveLength(100);
    expect(first.read).toBeLessThan(150);
    const next = await measured(() => store.changes.pick({ type: 'close_order' }, 'pending', first.result.at(-1)!.cursor, 100));
    expect(next.result[0]!.id).toBeGreaterThan(first.result.at(-1)!.id);
    expect(next.read).toBeLessThan(150);
    // From the latest back, and the tasks due before NOW only: the 2,000 after it are not read.
    const back = await measured(() =>
      store.changes.pick({ type: 'close_order' }, 'pending', undefined, 100, { descending: true, runAt: { op: '<', at: NOW } }),
    );
    expect(back.result).toHaveLength(100);
    expect(back.result[0]!.cursor).toEqual({ runAt: NOW - 10, id: back.result[0]!.id });
    expect(back.read).toBeLessThan(150);
    // At one instant: its one task.
    const at = await measured(() => store.changes.pick({ type: 'close_order' }, 'pending', undefined, 100, { runAt: { op: '=', at: NOW } }));
    expect(at.result).toHaveLength(1);
    expect(at.read).toBeLessThan(10);
    // The done tasks of the type, a status of their own in the same index.
    expect(await store.changes.pick({ type: 'close_order' }, 'done', undefined, 10)).toHaveLength(10);
  });

  it('a due page reads about the 100 rows it answers, not the done tasks nor the pending ones after it', async () => {
    const { result, read } = await measured(() => store.reads.pendingDueBetween(undefined, NOW, undefined, 100));
    expect(result).toHaveLength(100);
    expect(result[0]!.runAt).toBe(NOW - (ROWS / 2) * 10);
    expect(read).toBeLessThan(150);
  });

  it('the newest done tasks come from the index in its order: about 50 rows read for 50, no sort of all done tasks', async () => {
    const { result, read } = await measured(() => store.reads.listFinished('done', 50));
    expect(result).toHaveLength(50);
    const finished = result.map((task) => task.finishedAt!);
    expect(finished).toEqual([...finished].sort((a, b) => b - a));
    expect(finished[0]).toBe(NOW - 3_600_000 + (ROWS - 1) * 900);
    expect(read).toBeLessThan(120);
  });

  it('a page of the pending list reads about its rows, soonest first', async () => {
    const { result, read } = await measured(() =>
      store.reads.listByStatus('pending', {}, { offset: 0, limit: 50, maxBytes: 1_000_000, rowBytes: 1000 }),
    );
    expect(result.tasks.length).toBe(50);
    // Two reads of about 50 rows each (the page's ids and sizes, then its rows): not the 4,000
    // done tasks of a status before it, nor a sort of the 4,000 pending ones.
    expect(read).toBeLessThan(250);
  });
});

describe('an open task written with a finished_at', () => {
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.stop();
  });

  it('is mended at the start and runs', async () => {
    const [inserted] = await db.pool.query<any>(
      "INSERT INTO punctual_tasks (type, payload, run_at, status, finished_at) VALUES ('close_order', '{\"orderSn\":\"SN-MEND\"}', NOW(3) + INTERVAL 1 SECOND, 'pending', NOW(3))",
    );
    const id = Number(inserted.insertId);
    service = await startTestService(db, { RECONCILE_INTERVAL_MS: '3600000' });
    await service.boot();
    expect(
      service.logs.some((line) => line.msg === 'open tasks carried a finished_at, written outside punctual: cleared, so they run'),
    ).toBe(true);
    // It runs (this database has no shop's orders table, so close_order fails it: a run all the same).
    await waitFor(
      async () => (await db.query<any[]>('SELECT attempts FROM punctual_tasks WHERE id = ?', [id]))[0]?.attempts > 0,
      15_000,
      'the mended task to run',
    );
  });
});
