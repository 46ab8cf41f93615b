/**
 * B8: batch intake. The same rows (close_order tasks with a key and a tag) are written straight
 * into the table with multi-row INSERTs (1,000 rows per statement, the strongest honest baseline:
 * no HTTP, no checks, no ids read back) and through POST /tasks/batch (1,000 per request) on the
 * real server. Both use the same number of connections at once (the intake's 4 concurrent group
 * commits), so the ratio is what the API, its checks, the dedup and the tags cost over the bare
 * INSERT. Before each write the tables are emptied with TRUNCATE (ids going on from where they
 * were), so every write starts from the same state: after a DELETE, the same keys would meet
 * their delete-marked index entries not yet purged (slower, now and then a deadlock). The target
 * is the ratio to the same rows with the 11 columns a create names (key, type, payload, run_at,
 * zone, attempts, misfire, cron, tags, created and updated), written PAIRS times in turn with the
 * API's write: the median of the pairs' ratios (each write lasts about a second, and the machine's
 * pace drifts over a run more than the ratio moves within a pair). The bare INSERT of 5 columns,
 * the rest left to their defaults, is written once, for scale (its ratio has no target). For the
 * 11 columns and the batch route, the CPU the bench, the service and the database spent per 1,000
 * rows is printed, and the cores busy: on a machine whose cores they fill, that sets the ratio.
 * First, apart from HTTP and the database, the CPU of writing the batches' INSERT text as the
 * intake does, against mysql2 formatting the same statements from placeholders.
 *
 * Each side is measured warm, as a shop's long-running service is: the raw INSERT's client by the
 * 5-column write before the pairs, the service by WARMUP_ROUNDS rounds of BATCHES through the API
 * (other keys, emptied after) before anything is measured. Cold, the service spends about twice
 * the CPU per row on its first 40 batches while V8 compiles its hot paths; the warm-up's first and
 * last rounds are printed, so the difference stays in view.
 */
import { availableParallelism } from 'node:os';
import mysql from 'mysql2/promise';
import { datetimeLiteral } from '../../src/db/connection.js';
import { insertTuple } from '../../src/store/rows.js';
import type { NewTask } from '../../src/store/task-types.js';
import { SQL } from '../../src/store/sql/tasks.js';
import { tagTuples } from '../../src/store/tags.js';
import { insertValues } from '../helpers/insert-values.js';
import { type BenchDb, cpuMs, databasePid, median, startServer } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const S = 'B8';
const BATCH = 1000;
const BATCHES = 40;
/** The intake runs 4 group commits at once; the baseline gets as many connections. */
const CONNECTIONS = 4;
const RUN_AT = Date.parse('2030-01-01T00:00:00Z');
/** Pairs of phases (the raw INSERT of 11 columns, then the API) whose ratios' median is the target's. */
const PAIRS = 3;
/** Rounds of BATCHES through the API before the measured phases (their CPU is printed, their rows are emptied). */
const WARMUP_ROUNDS = 3;

function item(i: number, prefix = 'B8') {
  return {
    type: 'close_order',
    payload: { orderSn: `${prefix}-${i}` },
    runAt: RUN_AT + i,
    key: `close_order:${prefix}-${i}`,
    tags: [`merchant:${i % 50}`],
  };
}

/** CPU spent by each process of a phase, in ms (NaN where it cannot be read). */
type Cpu = { bench: number; service: number; database: number };

/** Reads the CPU so far of the bench itself, the service and the database (cpuMs; undefined pid: NaN). */
function cpuNow(servicePid: number | undefined, dbPid: number | undefined): Cpu {
  const { user, system } = process.cpuUsage();
  return {
    bench: (user + system) / 1000,
    service: servicePid === undefined ? Number.NaN : cpuMs(servicePid),
    database: dbPid === undefined ? Number.NaN : cpuMs(dbPid),
  };
}

type Phase = { rate: number; cpu: Cpu; wallMs: number };

/**
 * Runs `work(batch)` for every batch, CONNECTIONS at a time; answers rows per second and the CPU
 * each process spent meanwhile.
 */
async function rate(work: (batch: number) => Promise<void>, pids: [number | undefined, number | undefined]): Promise<Phase> {
  let next = 0;
  const before = cpuNow(...pids);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < BATCHES) await work(next++);
    }),
  );
  const wallMs = performance.now() - started;
  const after = cpuNow(...pids);
  return {
    rate: (BATCH * BATCHES) / (wallMs / 1000),
    cpu: { bench: after.bench - before.bench, service: after.service - before.service, database: after.database - before.database },
    wallMs,
  };
}

/** CPU ms of `phases` phases of BATCHES batches, per 1,000 rows. */
const perThousand = (ms: number, phases = 1) => (ms * 1000) / (BATCH * BATCHES * phases);

/** The CPU per 1,000 rows of a phase's runs, by process, and the cores busy on average (out of the machine's). */
function recordCpu(record: Record, phase: string, runs: { cpu: Cpu; wallMs: number }[]): void {
  const total = (of: (cpu: Cpu) => number) => runs.reduce((sum, run) => sum + of(run.cpu), 0);
  const cpu: Cpu = { bench: total((c) => c.bench), service: total((c) => c.service), database: total((c) => c.database) };
  const wallMs = runs.reduce((sum, run) => sum + run.wallMs, 0);
  for (const [who, ms] of [
    ['the bench', cpu.bench],
    ['the service', cpu.service],
    ['MariaDB', cpu.database],
  ] as const) {
    if (!Number.isNaN(ms)) record(S, `${phase}: CPU of ${who} per 1,000 rows`, perThousand(ms, runs.length), 'ms');
  }
  const busy = [cpu.bench, cpu.service, cpu.database].filter((ms) => !Number.isNaN(ms)).reduce((a, b) => a + b, 0);
  record(S, `${phase}: cores busy (of ${availableParallelism()})`, busy / wallMs, 'cores');
}

/** Both tables emptied as if new (TRUNCATE), the ids going on from where they were. */
async function emptyTasks(db: BenchDb): Promise<void> {
  const [[row]] = await db.pool.query<import('mysql2').RowDataPacket[]>('SELECT COALESCE(MAX(id), 0) AS id FROM punctual_tasks');
  const conn = await db.pool.getConnection();
  try {
    await conn.query('SET FOREIGN_KEY_CHECKS = 0');
    await conn.query('TRUNCATE punctual_task_tags');
    await conn.query('TRUNCATE punctual_tasks');
    await conn.query('SET FOREIGN_KEY_CHECKS = 1');
    await conn.query(`ALTER TABLE punctual_tasks AUTO_INCREMENT = ${Number(row?.id) + 1}`);
  } finally {
    conn.release();
  }
}

/** One batch of item rows written straight, `columns` valued by `values`, and its tags, in one transaction. */
async function rawInsert(db: BenchDb, batch: number, columns: string, values: (t: ReturnType<typeof item>) => unknown[]): Promise<void> {
  const items = Array.from({ length: BATCH }, (_, j) => item(batch * BATCH + j));
  const placeholders = `(${columns
    .split(',')
    .map(() => '?')
    .join(', ')})`;
  const conn = await db.pool.getConnection();
  try {
    await conn.beginTransaction();
    const [result] = await conn.query<import('mysql2').ResultSetHeader>(
      `INSERT INTO punctual_tasks (${columns}) VALUES ${items.map(() => placeholders).join(', ')}`,
      items.flatMap(values),
    );
    await conn.query(
      `INSERT INTO punctual_task_tags (task_id, tag) VALUES ${items.map(() => '(?, ?)').join(', ')}`,
      items.flatMap((t, j) => [result.insertId + j, t.tags[0]]),
    );
    await conn.commit();
  } finally {
    conn.release();
  }
}

/** The service's row for item `i`, as a create reads it (the defaults a create gives). */
function newTask(i: number): NewTask {
  const { payload, ...rest } = item(i);
  return { ...rest, payload, payloadJson: JSON.stringify(payload), timezone: 'UTC', maxAttempts: 4, misfire: 'run', cron: null };
}

/** A batch's two INSERTs (tasks with RETURNING, tags) as the intake writes them: text, each value escaped. */
function insertsAsText(tasks: NewTask[], now: number): string {
  const at = datetimeLiteral(now);
  const rows = SQL.insertRows(tasks.map((task) => insertTuple(task, at)).join(', '), true);
  return rows + SQL.insertTags(tasks.map((task, j) => tagTuples(j + 1, task.tags ?? [])).join(', '));
}

/** The same two INSERTs as mysql2 writes them from placeholders and values (what `query(sql, values)` does). */
function insertsByMysql2(tasks: NewTask[], now: number): string {
  const row = `(${Array.from({ length: 16 }, () => '?').join(', ')})`;
  const values = tasks.flatMap((task) => insertValues(task, now));
  const rows = mysql.format(SQL.insertRows(tasks.map(() => row).join(', '), true), values, false, 'Z');
  const pairs = tasks.flatMap((task, j) => (task.tags ?? []).flatMap((tag) => [j + 1, tag]));
  return rows + mysql.format(SQL.insertTags(tasks.flatMap((task) => (task.tags ?? []).map(() => '(?, ?)')).join(', ')), pairs);
}

/**
 * The client's share of the intake, apart from HTTP and the database: the CPU of writing B8's 40
 * batches' INSERTs as the intake does (text) against mysql2 formatting the same statements from
 * placeholders, the best of five rounds each. The two texts must be the same (the bench stops if not).
 */
function insertTextCost(record: Record): void {
  const batches = Array.from({ length: BATCHES }, (_, b) => Array.from({ length: BATCH }, (_, j) => newTask(b * BATCH + j)));
  const now = Date.UTC(2029, 11, 31, 23, 59, 30, 5);
  const cpu = () => process.cpuUsage().user / 1000;
  const best = (write: (tasks: NewTask[], now: number) => string) => {
    let least = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 5; round++) {
      const started = cpu();
      for (const tasks of batches) write(tasks, now);
      least = Math.min(least, cpu() - started);
    }
    return (least * 1000) / (BATCH * BATCHES);
  };
  if (!batches.every((tasks) => insertsAsText(tasks, now) === insertsByMysql2(tasks, now)))
    throw new Error("B8: the intake's INSERT text differs from mysql2's for the same values");
  const [text, byMysql2] = [best(insertsAsText), best(insertsByMysql2)];
  record(S, "the INSERTs' text, written by the intake: CPU per 1,000 rows", text, 'ms');
  record(S, "the INSERTs' text, formatted by mysql2 from placeholders: CPU per 1,000 rows", byMysql2, 'ms');
  record(S, "the INSERTs' text: the intake ÷ mysql2", text / byMysql2, '×');
}

/** POSTs batch `batch` of items named `prefix`; counts the items not created. */
async function postBatch(baseUrl: string, batch: number, prefix: string, counts: { refused: number }): Promise<void> {
  const tasks = Array.from({ length: BATCH }, (_, j) => item(batch * BATCH + j, prefix));
  const response = await fetch(`${baseUrl}/tasks/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tasks }),
  });
  const body = (await response.json()) as { created?: number };
  counts.refused += BATCH - (body.created ?? 0);
}

export async function batchIntake(db: BenchDb, record: Record): Promise<void> {
  insertTextCost(record);
  await db.reset();
  const server = await startServer(db);
  const pids: [number | undefined, number | undefined] = [server.child.pid, await databasePid(db)];
  try {
    const counts = { refused: 0 };
    for (let round = 1; round <= WARMUP_ROUNDS; round++) {
      const warm = await rate((batch) => postBatch(server.baseUrl, round * BATCHES + batch, 'warm-up', counts), pids);
      if (round === 1 || round === WARMUP_ROUNDS)
        record(
          S,
          `warm-up through the API, round ${round} of ${WARMUP_ROUNDS}: CPU of the service per 1,000 rows`,
          perThousand(warm.cpu.service),
          'ms',
        );
    }
    await emptyTasks(db);
    // The bare INSERT names only the columns it must; the rest take their defaults, the same
    // values the service writes (timezone UTC, max_attempts 4, misfire run, no cron).
    const raw = await rate(
      (batch) =>
        rawInsert(db, batch, 'task_key, type, payload, run_at, tags', (t) => [
          t.key,
          t.type,
          JSON.stringify(t.payload),
          new Date(t.runAt),
          JSON.stringify(t.tags),
        ]),
      pids,
    );
    record(S, 'raw multi-row INSERT rate', raw.rate, 'rows/s');
    // The target's pairs: the same rows with every column the service's INSERT names, then through
    // the API, PAIRS times in turn; the ratio is the median of the pairs' (a phase lasts about a
    // second, and the machine's pace drifts over a run more than the ratio moves within a pair).
    const raw11: Phase[] = [];
    const api: Phase[] = [];
    const ratios: number[] = [];
    for (let pair = 1; pair <= PAIRS; pair++) {
      await emptyTasks(db);
      const straight = await rate((batch) => {
        const at = new Date();
        return rawInsert(
          db,
          batch,
          'task_key, type, payload, run_at, timezone, max_attempts, misfire, cron, tags, created_at, updated_at',
          (t) => [t.key, t.type, JSON.stringify(t.payload), new Date(t.runAt), 'UTC', 4, 'run', null, JSON.stringify(t.tags), at, at],
        );
      }, pids);
      await emptyTasks(db);
      const through = await rate((batch) => postBatch(server.baseUrl, batch, 'B8', counts), pids);
      raw11.push(straight);
      api.push(through);
      ratios.push(through.rate / straight.rate);
      record(S, `batch ÷ raw INSERT of the same 11 columns, pair ${pair} of ${PAIRS}`, through.rate / straight.rate, '×');
    }
    record(S, "raw INSERT rate, the service's 11 columns (median)", median(raw11.map((run) => run.rate)), 'rows/s');
    recordCpu(record, 'raw INSERT of 11 columns', raw11);
    const apiRate = median(api.map((run) => run.rate));
    record(S, 'POST /tasks/batch rate (median)', apiRate, 'rows/s');
    recordCpu(record, 'POST /tasks/batch', api);
    record(S, 'batch ÷ raw INSERT', apiRate / raw.rate, '×');
    const ratio = median(ratios);
    record(S, 'batch ÷ raw INSERT of the same 11 columns (median of the pairs)', ratio, '×', { text: '≥ 0.7×', ok: ratio >= 0.7 });
    const stored = await db.count('SELECT COUNT(*) AS n FROM punctual_tasks');
    record(S, 'items not created', counts.refused, 'items', { text: '= 0', ok: counts.refused === 0 && stored === BATCH * BATCHES });
  } finally {
    await server.stop();
  }
}
