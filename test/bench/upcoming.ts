/**
 * npm run bench:upcoming: how long the dashboard's upcoming-load count takes on a 5,000,000-row
 * pending backlog, against the cheapest exact count of the same index range (no type, so no row
 * reads), measured in the same run; and how long the dashboard waits for it (served from the
 * cache while the next count runs).
 *
 * The backlog is B4's: 5,000,000 tasks spread over 30 days, three types, inserted with one
 * INSERT … SELECT per 500,000 from MariaDB's sequence engine (or a CTE of digits on MySQL), in a
 * punctual_test_* database dropped at the end. BACKLOG_DAYS=7 puts all of it in the chart's
 * window (the worst case). UPCOMING_DB=<an existing punctual_test_* database> reuses a backlog.
 */
import { performance } from 'node:perf_hooks';
import { Database } from '../../src/db/connection.js';
import { UpcomingLoad, HOURS, HOUR_MS } from '../../src/store/upcoming-load.js';
import { createTestDatabase, SERVER_URL, type TestDatabase } from '../helpers/db.js';

const N = 5_000_000;
const CHUNK = 500_000;
const DAYS = Number(process.env.BACKLOG_DAYS ?? 30);
const ROUNDS = 3;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function seed(db: TestDatabase): Promise<void> {
  const [version] = await db.query<any[]>('SELECT VERSION() AS v');
  const mariadb = String(version.v).includes('MariaDB');
  const spreadMs = DAYS * 24 * HOUR_MS;
  for (let start = 1; start <= N; start += CHUNK) {
    const end = Math.min(N, start + CHUNK - 1);
    const numbers = mariadb
      ? `seq_${start}_to_${end}`
      : `(WITH RECURSIVE s (seq) AS (SELECT ${start} UNION ALL SELECT seq + 1 FROM s WHERE seq < ${end}) SELECT seq FROM s) AS numbers`;
    await db.execute(
      `INSERT INTO tasks (type, payload, run_at)
       SELECT ELT(1 + seq % 4, 'close_order', 'close_order', 'webhook', 'coupon_expire'), JSON_OBJECT('orderSn', CONCAT('B', seq)),
              UTC_TIMESTAMP(3) + INTERVAL 60 SECOND + INTERVAL ROUND((seq - 1) * ${spreadMs / N} * 1000) MICROSECOND
         FROM ${numbers}`,
    );
    process.stdout.write(`  seeded ${end.toLocaleString('en')}\r`);
  }
  console.log('');
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
    const end = new Date(Math.floor(now / HOUR_MS) * HOUR_MS + HOURS * HOUR_MS);
    const [[inWindow]] = await database.pool.query<any[]>(
      "SELECT COUNT(*) AS n FROM tasks FORCE INDEX (tasks_status_run_at) WHERE status = 'pending' AND run_at < ?",
      [end],
    );
    console.log(`pending tasks in the 7-day window: ${Number(inWindow.n).toLocaleString('en')}`);

    const chart: number[] = [];
    const baseline: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      let started = performance.now();
      await upcoming.count(Date.now());
      chart.push(performance.now() - started);
      started = performance.now();
      await database.pool.query(
        `SELECT TIMESTAMPDIFF(HOUR, ?, run_at) AS bucket, COUNT(*) AS n FROM tasks FORCE INDEX (tasks_status_run_at)
          WHERE status = 'pending' AND run_at >= ? AND run_at < ? GROUP BY bucket`,
        [new Date(now), new Date(now), end],
      );
      baseline.push(performance.now() - started);
    }
    await upcoming.read(Date.now()); // the first read waits for a count; later ones are served
    const served: number[] = [];
    for (let i = 0; i < 100; i++) {
      const started = performance.now();
      await upcoming.read(Date.now());
      served.push(performance.now() - started);
    }
    const row = (what: string, ms: number[]) =>
      console.log(`  ${what}: median ${median(ms).toFixed(0)} ms (${ms.map((v) => v.toFixed(0)).join(', ')})`);
    row('chart count, by type (index range + row reads)', chart);
    row('baseline: covering count of the same range, no type', baseline);
    console.log(`  ratio chart / baseline: ${(median(chart) / median(baseline)).toFixed(2)}`);
    console.log(
      `  dashboard wait (served from the cache): median ${median(served).toFixed(3)} ms, max ${Math.max(...served).toFixed(3)} ms`,
    );
  } finally {
    await database.close();
    await db?.drop();
  }
}

await main();
