/**
 * What a refill costs the database once the id scan has seen many rows: the check for rows that
 * committed below the last id seen reads the gaps the scan jumped over, not every id it saw. The
 * scheduler runs in this process on a pool of one connection, so that connection's own
 * `Handler_read_*` counters are exactly the rows its refills read.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import type { Lifecycle } from '../../src/lifecycle/lifecycle.js';
import { TaskStore } from '../../src/store/task-store.js';
import { systemClock } from '../../src/time/clock.js';
import { Arming } from '../../src/timers/arming.js';
import { DueQueue } from '../../src/timers/due-queue.js';
import { Scheduler } from '../../src/timers/scheduler.js';
import { Timers } from '../../src/timers/timers.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let database: Database;

beforeAll(async () => {
  db = await createTestDatabase('refill_reads');
  database = new Database({ url: db.url, poolSize: 1, lockWaitTimeoutS: 5 });
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

/** Rows read by the pool's one connection so far (index dives and steps, and full scans). */
async function rowsRead(): Promise<number> {
  const [rows] = await database.pool.query<any[]>("SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%'");
  return rows.reduce((sum, row) => sum + Number(row.Value), 0);
}

/** `count` rows due tomorrow (never armed: beyond the horizon). */
async function insertFar(count: number): Promise<void> {
  for (let start = 0; start < count; start += 5000) {
    const rows = Array.from({ length: Math.min(5000, count - start) }, (_, i) => [
      'close_order',
      JSON.stringify({ orderSn: `far-${start + i}` }),
    ]);
    await db.pool.query(
      `INSERT INTO punctual_tasks (type, payload, run_at) VALUES ${rows.map(() => '(?, ?, UTC_TIMESTAMP(3) + INTERVAL 1 DAY)').join(', ')}`,
      rows.flat(),
    );
  }
}

describe('the refill on a table of many new ids', () => {
  it('reads the gaps the id scan left, not every id it has seen', async () => {
    const timers = new Timers(systemClock, () => undefined);
    const arming = new Arming(timers, new DueQueue());
    const scheduler = new Scheduler({
      store: new TaskStore(database),
      lifecycle: undefined as unknown as Lifecycle, // only the boot and the reconcile use it; neither runs here
      clock: systemClock,
      log: pino({ level: 'silent' }),
      arming,
      horizonMs: 60_000,
      refillIntervalMs: 1000,
      reconcileIntervalMs: Number.POSITIVE_INFINITY,
      misfireGraceMs: 60_000,
    });
    try {
      await insertFar(30_000);
      // A row deleted in the middle: the ids seen have a gap now, as after a rollback or a purge.
      await db.pool.query('DELETE FROM punctual_tasks WHERE id = 15000');
      await scheduler.refill(); // the first scan reads the 30,000 ids once
      const before = await rowsRead();
      for (let i = 0; i < 10; i++) await scheduler.refill();
      const read = (await rowsRead()) - before;
      // Each refill: the horizon's window (empty), the ids above the last (none), the one gap
      // (empty), a few index looks each; the counters' own SHOW reads its rows too.
      expect(read).toBeLessThan(100);

      // A row that commits into the gap is found there, and armed.
      await db.pool.query(
        "INSERT INTO punctual_tasks (id, type, payload, run_at) VALUES (15000, 'close_order', JSON_OBJECT('orderSn', 'late'), UTC_TIMESTAMP(3) + INTERVAL 30 SECOND)",
      );
      await scheduler.refill();
      expect(timers.has(15000)).toBe(true);
    } finally {
      await scheduler.stop();
      timers.disarmAll();
    }
  });
});
