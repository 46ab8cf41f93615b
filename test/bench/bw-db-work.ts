/**
 * BW: the database's work per firing, and what each part of the schema adds to it. The firing
 * transaction of an in-process batch that succeeds, with the service's own statements (lock the
 * due rows, mark them done: the runs are on record in their rows, store/run-history.ts), runs
 * straight against the database on one connection (BW_CONNECTIONS for more: they add lock waits,
 * not work), 50 tasks a transaction, over 100,000 due tasks. The database's work, from the first
 * statement until InnoDB has purged what the transactions left behind (the delete-marked index
 * entries, cleaned in the background), is divided by the tasks: the buffer-pool pages touched and
 * written and the redo bytes (counts, which hold still from run to run), and the server's CPU time
 * (which on a shared machine does not). No HTTP, no timers, no handler: what is left is what the
 * tables, their indexes and the run history cost. Each variant starts from a freshly migrated
 * database and changes one thing: the run history off, a row per successful run besides (as
 * releases before 0.2 wrote), or one secondary index of `punctual_tasks` dropped (each in turn).
 * The variants are interleaved, three times over (the order reversed every other time), after one
 * pass that is not counted, and the medians reported beside the schema as migrated, measured in the
 * same run. Needs the database on this machine (its CPU time is read from /proc).
 */
import mysql from 'mysql2/promise';
import { SQL } from '../../src/store/sql/tasks.js';
import { TASK_RUNS } from '../../src/store/sql/task-runs.js';
import { dbCounters, type DbWork } from './b1d-api.js';
import { type BenchDb, cpuMs, databasePid, sleep } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const S = 'BW';
const TASKS = 100_000;
const BATCH = 50;
const CONNECTIONS = Number(process.env.BW_CONNECTIONS ?? 1);
const ROUNDS = 3;
const DUE_FROM = Date.parse('2026-01-01T00:00:00Z');

interface Variant {
  name: string;
  /** The run history: on (the runs in their tasks' rows), on with a row per run besides, or off. */
  history: 'on' | 'rows' | 'off';
  change?: string;
}

/** The process a firing names in done_by, as long as a service's (host:pid:tag). */
const PROCESS = 'bench-host.example:12345:a1b2c3d4';

/** A table's secondary indexes, as migrated (the unique ones stay: they are rules, not speed). */
async function secondaryIndexes(db: BenchDb, table: string): Promise<string[]> {
  const [rows] = await db.pool.query<mysql.RowDataPacket[]>(
    `SELECT DISTINCT index_name AS name FROM information_schema.statistics
      WHERE table_schema = ? AND table_name = ? AND non_unique = 1 ORDER BY index_name`,
    [db.name, table],
  );
  return rows.map((row) => String(row.name));
}

/** A variant per secondary index of `table`: the index dropped. */
async function withoutEachIndex(db: BenchDb, table: string): Promise<Variant[]> {
  return (await secondaryIndexes(db, table)).map((index) => ({
    name: `without ${index}`,
    history: 'on',
    change: `DROP INDEX ${index} ON ${table}`,
  }));
}

/** Waits until InnoDB's purge has caught up (its history list under 100 transactions, or 60 s). */
async function purged(db: BenchDb): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const [[row]] = await db.pool.query<mysql.RowDataPacket[]>(
      "SELECT count AS n FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'",
    );
    if (row === undefined || Number(row.n) < 100) return;
    await sleep(100);
  }
}

/** What one task cost the database: its CPU (µs; noisy on a shared machine) and the counts that are not. */
interface Work {
  cpuUs: number;
  redoBytes: number;
  pageTouches: number;
  pageWrites: number;
}

/** The database server's work per task for one variant on a fresh database. */
async function workPerTask(db: BenchDb, dbPid: number, variant: Variant): Promise<Work> {
  await db.reset();
  if (variant.change !== undefined) await db.exec(variant.change);
  await db.exec(
    `INSERT INTO punctual_tasks (task_key, type, payload, run_at)
     SELECT CONCAT('bw-', seq), 'close_order', JSON_OBJECT('orderSn', CONCAT('BW', seq)), ? + INTERVAL seq MICROSECOND
     FROM ${db.numbers(TASKS)}`,
    [new Date(DUE_FROM)],
  );
  const [[range]] = await db.pool.query<mysql.RowDataPacket[]>('SELECT MIN(id) AS lo, MAX(id) AS hi FROM punctual_tasks');
  await purged(db);
  const now = new Date(DUE_FROM + 60_000);
  let next = Number(range!.lo);
  const last = Number(range!.hi);
  const before = cpuMs(dbPid);
  const counted: DbWork = await dbCounters(db);
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const conn = await db.pool.getConnection();
      try {
        while (next <= last) {
          const ids = Array.from({ length: BATCH }, (_, k) => next + k).filter((id) => id <= last);
          next += BATCH;
          await conn.query('BEGIN');
          const [locked] = await conn.query<mysql.RowDataPacket[]>(SQL.lockDue, [ids, now]);
          await conn.query(SQL.markDone(0), [now, variant.history === 'on' ? PROCESS : null, now, now, ids]);
          if (variant.history === 'rows')
            await conn.query(
              TASK_RUNS.insert(locked.length),
              locked.flatMap((row) => [row.id, 1, 'done', now, now, now, 0, 1, null, null, PROCESS, 0, null, 'closed']),
            );
          await conn.query('COMMIT');
        }
      } finally {
        conn.release();
      }
    }),
  );
  await purged(db);
  const spent = cpuMs(dbPid) - before;
  const after = await dbCounters(db);
  const [[done]] = await db.pool.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'");
  if (Number(done!.n) !== TASKS) throw new Error(`${variant.name}: ${done!.n} of ${TASKS} tasks done`);
  return {
    cpuUs: (spent * 1000) / TASKS,
    redoBytes: (after.redoBytes - counted.redoBytes) / TASKS,
    pageTouches: (after.pageTouches - counted.pageTouches) / TASKS,
    pageWrites: (after.pageWrites - counted.pageWrites) / TASKS,
  };
}

const FIGURES: [keyof Work, string, string][] = [
  ['cpuUs', 'database CPU per task', 'µs'],
  ['redoBytes', 'redo log per task', 'bytes'],
  ['pageTouches', 'pages touched per task', 'pages'],
  ['pageWrites', 'page writes per task', 'pages'],
];

export async function databaseWork(db: BenchDb, record: Record): Promise<void> {
  const dbPid = await databasePid(db);
  if (dbPid === undefined) throw new Error('BW reads the database server CPU time: it needs the database on this machine');
  await db.reset();
  const variants: Variant[] = [
    { name: 'as migrated', history: 'on' },
    { name: 'without the run history', history: 'off' },
    { name: 'with a row per successful run (before 0.2)', history: 'rows' },
    ...(await withoutEachIndex(db, 'punctual_tasks')),
  ];
  const spent = new Map<string, Work[]>(variants.map((variant) => [variant.name, []]));
  await workPerTask(db, dbPid, variants[0]!); // a first pass warms the server's caches; not counted
  for (let round = 0; round < ROUNDS; round++)
    for (const variant of round % 2 === 0 ? variants : [...variants].reverse())
      spent.get(variant.name)!.push(await workPerTask(db, dbPid, variant));
  const median = (name: string, figure: keyof Work) => {
    const values = spent
      .get(name)!
      .map((work) => work[figure])
      .sort((a, b) => a - b);
    return Math.round(values[Math.floor(values.length / 2)]! * 10) / 10;
  };
  for (const [figure, label, unit] of FIGURES) {
    record(S, `as migrated: ${label}`, median('as migrated', figure), unit);
    for (const variant of variants.slice(1)) record(S, `${variant.name}: ${label}`, median(variant.name, figure), unit);
  }
}
