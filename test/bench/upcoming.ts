/**
 * npm run bench:upcoming: how long the dashboard's upcoming-load count takes on a 5,000,000-row
 * pending backlog, against the floor (a bare COUNT(*) of the same index range) and the statement
 * it replaced, measured in the same run; and how long the dashboard waits for it (served from the
 * cache while the next count runs). It checks the plan (the index alone, no temporary table) and
 * that the chart's buckets add up to the tasks in the window.
 *
 * The backlog is B4's: 5,000,000 tasks spread over 30 days, three types, inserted with one
 * multi-row INSERT … SELECT per 500,000 from a numbers table, in a punctual_test_* database
 * dropped at the end (UPCOMING_KEEP=1 keeps it and prints its name). BACKLOG_DAYS=7 puts all of
 * it in the chart's window (the worst case). UPCOMING_DB=<an existing punctual_test_* database>
 * reuses a backlog.
 */
import { performance } from 'node:perf_hooks';
import { Database } from '../../src/db/connection.js';
import { SQL } from '../../src/store/sql/tasks.js';
import { UpcomingLoad, HOURS, HOUR_MS, MINUTE_MS } from '../../src/store/upcoming-load.js';
import { createTestDatabase, SERVER_URL, type TestDatabase } from '../helpers/db.js';

const N = 5_000_000;
const CHUNK = 500_000;
const DAYS = Number(process.env.BACKLOG_DAYS ?? 30);
const ROUNDS = 5;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * A numbers table 0..CHUNK-1, built from a cross join of digits (the same on MariaDB and MySQL, no
 * recursion limit), then one multi-row INSERT … SELECT per CHUNK tasks.
 */
async function seed(db: TestDatabase): Promise<void> {
  const spreadMs = DAYS * 24 * HOUR_MS;
  const digits =
    'SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9';
  const places = Math.ceil(Math.log10(CHUNK));
  const tables = Array.from({ length: places }, (_, i) => `(${digits}) AS d${i}`).join(' CROSS JOIN ');
  const value = Array.from({ length: places }, (_, i) => `d${i}.d * ${10 ** i}`).join(' + ');
  await db.execute('CREATE TABLE bench_numbers (n INT UNSIGNED NOT NULL PRIMARY KEY)');
  await db.execute(`INSERT INTO bench_numbers (n) SELECT n FROM (SELECT ${value} AS n FROM ${tables}) AS all_numbers WHERE n < ${CHUNK}`);
  // One base instant for the whole backlog, so the chunks join up.
  const [base] = await db.query<any[]>('SELECT UTC_TIMESTAMP(3) + INTERVAL 60 SECOND AS t');
  for (let offset = 0; offset < N; offset += CHUNK) {
    const count = Math.min(CHUNK, N - offset);
    await db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at)
       SELECT ELT(1 + seq % 4, 'close_order', 'close_order', 'webhook', 'coupon_expire'), JSON_OBJECT('orderSn', CONCAT('B', seq)),
              ? + INTERVAL ROUND(seq * ${spreadMs / N} * 1000) MICROSECOND
         FROM (SELECT n + ${offset} AS seq FROM bench_numbers WHERE n < ${count}) AS numbers`,
      [base.t],
    );
    process.stdout.write(`  seeded ${(offset + count).toLocaleString('en')}\r`);
  }
  console.log('');
  await db.execute('DROP TABLE bench_numbers');
}

async function main(): Promise<void> {
  const reuse = process.env.UPCOMING_DB;
  if (reuse !== undefined && !reuse.startsWith('punctual_test_')) throw new Error('UPCOMING_DB must name a punctual_test_* database');
  const db = reuse === undefined ? await createTestDatabase('upcoming') : undefined;
  const url = db?.url ?? `${SERVER_URL.replace(/\/$/, '')}/${reuse}`;
  const database = new Database({ url, poolSize: 2, lockWaitTimeoutS: 5, deadlineMs: 600_000 });
  try {
    if (db !== undefined) {
      const started = performance.now();
      await seed(db);
      console.log(
        `seeded ${N.toLocaleString('en')} pending tasks over ${DAYS} days in ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
    }
    const upcoming = new UpcomingLoad(database);
    const now = Date.now();
    const from = new Date(Math.floor(now / MINUTE_MS) * MINUTE_MS);
    const end = new Date(Math.floor(now / HOUR_MS) * HOUR_MS + HOURS * HOUR_MS);
    const window = [from.getTime() / MINUTE_MS, end.getTime() / MINUTE_MS];
    const [[inWindow]] = await database.pool.query<any[]>(
      "SELECT COUNT(*) AS n FROM punctual_tasks FORCE INDEX (tasks_status_run_at) WHERE status = 'pending' AND run_at >= ? AND run_at < ?",
      [from, end],
    );
    console.log(`pending tasks in the 7-day window: ${Number(inWindow.n).toLocaleString('en')}`);
    const [typeRows] = await database.pool.query<any[]>(SQL.pendingTypes);
    const types = typeRows.map((row: { type: string }) => row.type);
    const [[plan]] = await database.pool.query<any[]>(`EXPLAIN ${SQL.upcomingLoad}`, [types, ...window]);
    console.log(`  plan: ${plan.type} on ${plan.key}, ${plan.Extra}`);
    if (plan.key !== 'tasks_type_status_run_minute_run_at' || !/Using index/.test(plan.Extra) || /temporary|filesort/.test(plan.Extra)) {
      throw new Error('the chart count does not read its index alone, in order');
    }

    const chart: number[] = [];
    const floor: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      let started = performance.now();
      const counts = await upcoming.count(now);
      chart.push(performance.now() - started);
      const counted = Object.values(counts.hours.byType).reduce((sum, hours) => sum + hours.reduce((a, b) => a + b, 0), 0);
      if (counted !== Number(inWindow.n)) throw new Error(`the chart counted ${counted} tasks, the window holds ${inWindow.n}`);
      started = performance.now();
      await database.pool.query(
        `SELECT COUNT(*) FROM punctual_tasks FORCE INDEX (tasks_type_status_run_minute_run_at)
          WHERE type IN (?) AND status = 'pending' AND run_minute >= ? AND run_minute < ?`,
        [types, ...window],
      );
      floor.push(performance.now() - started);
    }
    // The statement this one replaced: grouped by an expression of run_at, so through a temporary
    // table, with each row read for its type.
    const started = performance.now();
    await database.pool.query(
      `SELECT type, TIMESTAMPDIFF(HOUR, ?, run_at) AS bucket, COUNT(*) AS n FROM punctual_tasks FORCE INDEX (tasks_status_run_at)
        WHERE status = 'pending' AND run_at >= ? AND run_at < ? GROUP BY type, bucket`,
      [from, from, end],
    );
    const before = performance.now() - started;
    await upcoming.read(Date.now()); // the first read waits for a count; later ones are served
    const served: number[] = [];
    for (let i = 0; i < 100; i++) {
      const started = performance.now();
      await upcoming.read(Date.now());
      served.push(performance.now() - started);
    }
    const row = (what: string, ms: number[]) =>
      console.log(`  ${what}: median ${median(ms).toFixed(0)} ms (${ms.map((v) => v.toFixed(0)).join(', ')})`);
    row('chart count, per type and minute (one index range a type, in order)', chart);
    row('floor: a bare COUNT(*) of the same index ranges', floor);
    console.log(`  ratio chart / floor: ${(median(chart) / median(floor)).toFixed(2)}`);
    console.log(`  before: grouped by an expression of run_at over (status, run_at), rows read for their type: ${before.toFixed(0)} ms`);
    console.log(
      `  dashboard wait (served from the cache): median ${median(served).toFixed(3)} ms, max ${Math.max(...served).toFixed(3)} ms`,
    );
  } finally {
    await database.close();
    if (db !== undefined && process.env.UPCOMING_KEEP === '1') {
      await db.pool.end();
      console.log(`kept the backlog: UPCOMING_DB=${db.name}`);
    } else {
      await db?.drop();
    }
  }
}

await main();
