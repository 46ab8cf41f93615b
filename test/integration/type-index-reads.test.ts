/**
 * What the reads of one type's pending tasks cost the database: each is a range of the
 * (type, status, run_minute, run_at) index that starts and stops at the instants it names, read
 * in the index's order, so it reads about the rows it answers, not the rest of its type or of
 * their minute. The stores run on a pool of one connection, whose own `Handler_read_*` counters
 * are exactly the rows it read. A lease's lock covers the rows it returns only: a second lease
 * meanwhile gets the next ones.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import type { Connection } from '../../src/db/connection.js';
import { PullStore } from '../../src/store/pulls.js';
import { SQL } from '../../src/store/sql/tasks.js';
import { TaskStore } from '../../src/store/task-store.js';
import { TypeControlStore } from '../../src/store/type-controls.js';
import { UpcomingLoad } from '../../src/store/upcoming-load.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const MINUTE = 60_000;
// 30 s into a minute: of the worker type's tasks in that minute, half are due, half are not yet.
const MINUTE_START = Date.UTC(2031, 2, 4, 9, 15, 0);
const NOW = MINUTE_START + 30_000;
const PER_HALF = 3000;
const STEP_MS = 30_000 / PER_HALF; // 10 ms apart

let db: TestDatabase;
let database: Database;
let other: Database;

const at = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

/** Rows read by `conn`'s session so far (index dives and steps, and full scans). */
async function rowsRead(conn: { query: Connection['query'] }): Promise<number> {
  const [rows] = await conn.query<any[]>("SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%'");
  return rows.reduce((sum: number, row: any) => sum + Number(row.Value), 0);
}

async function measured<T>(fn: () => Promise<T>): Promise<{ result: T; read: number }> {
  const before = await rowsRead(database.pool);
  const result = await fn();
  // The counters' own SHOW reads a few dozen rows of its own; measured with nothing between.
  const read = (await rowsRead(database.pool)) - before;
  return { result, read };
}

beforeAll(async () => {
  db = await createTestDatabase('type_index_reads');
  database = new Database({ url: db.url, poolSize: 1, lockWaitTimeoutS: 5 });
  other = new Database({ url: db.url, poolSize: 1, lockWaitTimeoutS: 5 });
  // The worker type 'pull_w': PER_HALF due in the minute before NOW, PER_HALF later in the same
  // minute, 10 ms apart. 'close_order' tasks at the same instants and done tasks of 'pull_w'
  // around them: rows of the same minute that none of the reads below may count.
  const rows: [string, string, string][] = [];
  for (let i = 0; i < 2 * PER_HALF; i++) {
    const runAt = at(MINUTE_START + i * STEP_MS);
    rows.push(['pull_w', runAt, 'pending'], ['close_order', runAt, 'pending'], ['pull_w', runAt, 'done']);
  }
  for (let start = 0; start < rows.length; start += 3000) {
    const chunk = rows.slice(start, start + 3000);
    await db.pool.query(
      `INSERT INTO punctual_tasks (type, payload, run_at, status) VALUES ${chunk.map(() => "(?, '{}', ?, ?)").join(', ')}`,
      chunk.flat(),
    );
  }
  await db.pool.query('ANALYZE TABLE punctual_tasks');
}, 120_000);

afterAll(async () => {
  await database?.close();
  await other?.close();
  await db?.drop();
});

describe('reads of a type on its (type, status, run_minute, run_at) index', () => {
  it("a lease locks and reads the due tasks it returns, oldest first, and the next one's instant", async () => {
    const pulls = new PullStore(database);
    const rival = new PullStore(other);
    await pulls.transaction(async (conn) => {
      const before = await rowsRead(conn);
      const { locked, next } = await pulls.lockDue(conn, ['pull_w'], 50, NOW);
      const read = (await rowsRead(conn)) - before;
      expect(locked).toHaveLength(50);
      expect(locked.map((task) => task.runAt)).toEqual(Array.from({ length: 50 }, (_, i) => MINUTE_START + i * STEP_MS));
      // The next task of the type falls due at NOW (the first of the later half; run_at > NOW is the one after).
      expect(next).toBe(NOW + STEP_MS);
      // 50 rows and their look-ahead, not the 3,000 due ones (nor the minute's 6,000).
      expect(read).toBeLessThan(150);
      // While this lock is held, another lease skips these 50 and takes the next 50.
      const second = await rival.transaction((otherConn) => rival.lockDue(otherConn, ['pull_w'], 50, NOW));
      expect(second.locked.map((task) => task.runAt)).toEqual(Array.from({ length: 50 }, (_, i) => MINUTE_START + (50 + i) * STEP_MS));
    });
  });

  it('the look ahead over several types takes the earliest of them, one entry each', async () => {
    const pulls = new PullStore(database);
    const { result, read } = await measured(() =>
      pulls.transaction((conn) => pulls.lockDue(conn, ['close_order', 'pull_w', 'no_such_type'], 1, NOW)),
    );
    expect(result.next).toBe(NOW + STEP_MS);
    // One lease row, sorted across the types' due rows (a lease of several types sorts them),
    // which is the 6,000 due ones here; the look-ahead adds a few entries, not the later 6,000.
    expect(read).toBeLessThan(2 * PER_HALF + 100);
  });

  it('the count of a type due counts its due entries only', async () => {
    const controls = new TypeControlStore(database);
    const { result, read } = await measured(() => controls.countDueByType(['pull_w'], NOW, 1_000_000));
    expect(result.get('pull_w')).toBe(PER_HALF + 1); // run_at <= NOW: NOW itself is due
    expect(read).toBeLessThan(2 * PER_HALF + 100); // 3,001 entries, and as many rows of the LIMIT's derived table
  });

  it("a due page's worker tasks are found over the page's span, not their minute", async () => {
    const store = new TaskStore(database, () => ['pull_w']);
    const from = MINUTE_START + 1000 * STEP_MS;
    const { result, read } = await measured(() => store.reads.pendingDueBetween(from, NOW, undefined, 100));
    expect(result).toHaveLength(100);
    // The page alternates the two types at each instant; the worker type's half is marked.
    expect(result.filter((entry) => entry.untimed)).toHaveLength(50);
    // The page's 100 entries on (status, run_at), and its span's 50 worker entries: not the
    // worker type's 6,000 in that minute.
    expect(read).toBeLessThan(400);
  });

  it("a page of one type's pending tasks after a cursor starts at the cursor", async () => {
    const store = new TaskStore(database);
    const cursorAt = MINUTE_START + 4000 * STEP_MS;
    const [cursorRow] = await db.query<any[]>("SELECT id FROM punctual_tasks WHERE type = 'pull_w' AND status = 'pending' AND run_at = ?", [
      at(cursorAt),
    ]);
    const { result, read } = await measured(() =>
      store.reads.listPendingWithin({
        type: 'pull_w',
        limit: 100,
        after: { runAt: cursorAt, id: cursorRow.id },
        maxBytes: 1 << 20,
        rowBytes: 200,
      }),
    );
    expect(result.tasks.map((task) => task.runAt)).toEqual(Array.from({ length: 100 }, (_, i) => cursorAt + (i + 1) * STEP_MS));
    expect(result.tasks.every((task) => task.type === 'pull_w' && task.status === 'pending')).toBe(true);
    // The page's 101 entries and the 100 tasks read whole, not the type's 4,000 before the cursor.
    expect(read).toBeLessThan(400);
  });

  it('the upcoming-load chart counts each type per minute from the index, in its order', async () => {
    const { result, read } = await measured(() => new UpcomingLoad(database).count(NOW));
    expect(result.minutes.byType.pull_w?.[0]).toBe(2 * PER_HALF); // the minute of NOW
    expect(result.minutes.byType.close_order?.[0]).toBe(2 * PER_HALF);
    expect(result.overdue).toBe(0);
    const minute = Math.floor(NOW / MINUTE);
    const [plan] = await db.query<any[]>(`EXPLAIN ${SQL.upcomingLoad}`, [['pull_w', 'close_order'], minute, minute + 60]);
    expect(plan).toMatchObject({ table: 'punctual_tasks', type: 'range', key: 'tasks_type_status_run_minute_run_at' });
    expect(plan.Extra).toContain('Using index');
    expect(plan.Extra).not.toMatch(/temporary|filesort/);
    // The window's 12,000 pending entries and the types' dives: no done task, no row.
    expect(read).toBeLessThan(4 * PER_HALF + 200);
  });
});
