/**
 * npm run bench [-- B1 B3 …]: the scenarios of the performance issue against the local MariaDB.
 * Each starts the real server (dist/app/main.js, default settings) and talks to it only over HTTP
 * and through the database. Ratios compare two things measured in the same run. Prints one
 * table and writes the same figures to bench-results.json.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import autocannon from 'autocannon';
import mysql from 'mysql2/promise';
import { apiPrecision, BASELINE_COMMIT } from './b1d-api.js';
import { TRACING_BEFORE, tracingCost } from './bt-tracing.js';
import { batchIntake } from './b8-batch.js';
import { databaseWork } from './bw-db-work.js';
import { pullWorkers } from './b10-workers.js';
import { priorityWall } from './b11-priority.js';
import { peerLateness, RATES, SECONDS } from './peers.js';
import { shardedCreates } from './b7-creates.js';
import { network } from './b9-network.js';
import { search } from './b13-search.js';
import {
  BenchDb,
  heapAfterGc,
  median,
  memoryOf,
  npmStart,
  quantile,
  type Results,
  type Row,
  scrape,
  type Server,
  type StartKind,
  sleep,
  startServer,
  utcSql,
  waitUntil,
} from './lib.js';

const rows: Row[] = [];
/** What each scenario does, for the table `npm run bench:readme` writes into the README. */
const described: Record<string, string> = {};
/** DB_POOL_SIZE's default (CONCURRENCY 4 + 6): the claim loop gets as many connections. */
const DEFAULT_POOL_SIZE = 10;
/** The service's group commit: up to this many creates per multi-row INSERT (task-store INSERT_BATCH), 4 at a time. */
const INTAKE_BATCH = 200;
const INTAKE_BATCHES_RUNNING = 4;

function record(scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }): void {
  rows.push({ scenario, metric, value: Math.round(value * 100) / 100, unit, target: target?.text, ok: target?.ok });
  const mark = target === undefined ? '' : target.ok ? `  ✓ ${target.text}` : `  ✗ ${target.text}`;
  console.log(`  ${scenario} ${metric}: ${Math.round(value * 100) / 100} ${unit}${mark}`);
}

async function eventLoop(server: Server, scenario: string): Promise<void> {
  const metrics = await scrape(server);
  record(scenario, 'event-loop delay p99', (metrics.get('nodejs_eventloop_lag_p99_seconds') ?? Number.NaN) * 1000, 'ms');
  record(scenario, 'event-loop delay max', (metrics.get('nodejs_eventloop_lag_max_seconds') ?? Number.NaN) * 1000, 'ms');
}

function peakRss(server: Server, scenario: string, limitMb?: number): void {
  const { peakMb } = memoryOf(server.child.pid!);
  record(scenario, 'peak RSS', peakMb, 'MB', limitMb === undefined ? undefined : { text: `≤ ${limitMb} MB`, ok: peakMb <= limitMb });
}

async function doneCount(db: BenchDb): Promise<number> {
  return db.count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'");
}

// ── B0 ──────────────────────────────────────────────────────────────────────────────────────
/** Starts of each kind, interleaved; the medians are reported. */
const B0_REPEATS = Number(process.env.BENCH_B0_REPEATS ?? 5);
described.B0 =
  'start to `/readyz` 200, empty table: `npm start`, the `punctual` bin and `node dist/app/main.js`, each against a bare Fastify + mysql2 process that connects and listens (test/bench/bare-start.mjs), interleaved, medians; and `npm start` with 1,000,000 pending due within the horizon';
async function startup(db: BenchDb): Promise<void> {
  const S = 'B0';
  const N = 1_000_000;
  await db.reset();
  const kinds: StartKind[] = ['bare', 'node dist/app/main.js', 'bin', 'npm start'];
  const times = new Map<StartKind, number[]>(kinds.map((kind) => [kind, []]));
  const rss = new Map<StartKind, number[]>(kinds.map((kind) => [kind, []]));
  for (let r = 0; r < B0_REPEATS; r++) {
    for (const kind of r % 2 === 0 ? kinds : [...kinds].reverse()) {
      const started = await npmStart(db, kind);
      try {
        times.get(kind)!.push(started.readyMs);
        rss.get(kind)!.push(memoryOf(started.pid).peakMb);
      } finally {
        await started.stop();
      }
    }
  }
  const bare = median(times.get('bare')!);
  record(S, 'bare Fastify + mysql2 to ready', bare / 1000, 's');
  for (const kind of kinds.slice(1)) {
    const ms = median(times.get(kind)!);
    record(S, `${kind} to ready, empty table`, ms / 1000, 's');
    if (kind !== 'node dist/app/main.js') record(S, `${kind} ÷ bare`, ms / bare, '×', { text: '≤ 2×', ok: ms / bare <= 2 });
    record(S, `peak RSS, ${kind}`, median(rss.get(kind)!), 'MB');
  }
  // Due between 3 and 9 minutes from now: inside the 10-minute horizon, none fires meanwhile.
  await db.seedTasks(N, utcSql(Date.now() + 3 * 60_000, `(seq - 1) * ${(6 * 60_000) / N}`));
  const started = await npmStart(db);
  try {
    record(S, 'npm start to ready, 1,000,000 pending', started.readyMs / 1000, 's', { text: '≤ 3 s', ok: started.readyMs <= 3000 });
    record(S, 'peak RSS, 1,000,000 pending', memoryOf(started.pid).peakMb, 'MB');
  } finally {
    await started.stop();
  }
}

// ── B1, B1b, B1c ──────────────────────────────────────────────────────────────────────────
/** N `close_order` due uniformly over 10 s, run by a server started with `env`: how late each order closed (ms), sorted. */
async function closeLatenesses(db: BenchDb, S: string, N: number, env: Record<string, string> = {}): Promise<number[]> {
  await db.reset();
  await db.seedOrders(N);
  const server = await startServer(db, { env });
  try {
    await scrape(server); // resets the event-loop histogram
    // Inserted straight into the table, the refill arms them; far enough ahead that the insert is done.
    const first = Date.now() + 3000 + N / 5;
    await db.seedTasks(N, utcSql(first, `(seq - 1) * ${10_000 / N}`));
    if (Date.now() >= first) throw new Error(`seeding ${N} tasks outlasted the lead time`);
    await waitUntil(async () => (await doneCount(db)) === N, 300_000, `${S} tasks to run`);
    await eventLoop(server, S);
    peakRss(server, S);
    return await db.closeLateness();
  } finally {
    await server.stop();
  }
}

function precision(S: string, N: number, p99Ms: number, maxMs?: number): (db: BenchDb) => Promise<void> {
  described[S] = `precision: ${N.toLocaleString('en')} \`close_order\` due uniformly over 10 s (${(N / 10).toLocaleString('en')}/s)`;
  return async (db) => {
    const late = await closeLatenesses(db, S, N);
    record(S, 'tasks run', late.length, 'tasks', { text: `= ${N}`, ok: late.length === N });
    record(S, 'early', late.filter((ms) => ms < 0).length, 'tasks', { text: '= 0', ok: late.every((ms) => ms >= 0) });
    record(S, 'lateness p50', quantile(late, 0.5), 'ms');
    record(S, 'lateness p99', quantile(late, 0.99), 'ms', { text: `≤ ${p99Ms} ms`, ok: quantile(late, 0.99) <= p99Ms });
    const max = late[late.length - 1]!;
    record(S, 'lateness max', max, 'ms', maxMs === undefined ? undefined : { text: `≤ ${maxMs} ms`, ok: max <= maxMs });
  };
}

described.BH =
  "run history's cost on the hot path: B1's, B1b's and B1c's loads (10,000, 50,000 and 100,000 `close_order` over 10 s), each with `RUN_HISTORY=off` (the baseline: no run on record) and `on`, interleaved in one run (the order alternates from load to load), with the on/off ratios";
/**
 * B1, B1b and B1c with the run history off and on: the same loads, the same machine, minutes
 * apart, the order alternating from one load to the next so a machine that grows busier over the
 * run does not always weigh on the same setting.
 */
async function historyCost(db: BenchDb): Promise<void> {
  const S = 'BH';
  for (const [index, [label, N]] of (
    [
      ['B1', 10_000],
      ['B1b', 50_000],
      ['B1c', 100_000],
    ] as const
  ).entries()) {
    const p: Record<string, { p50: number; p99: number }> = {};
    for (const history of index % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      const late = await closeLatenesses(db, `${S} ${label} history ${history}`, N, { RUN_HISTORY: history });
      // Each run on record: a successful one in its task's row (done_by), the others in rows.
      const runs =
        (await db.count('SELECT COUNT(*) AS n FROM punctual_task_runs')) +
        (await db.count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE done_by IS NOT NULL'));
      const expected = history === 'on' ? N : 0;
      record(S, `${label} history ${history}: runs on record`, runs, 'runs', { text: `= ${expected}`, ok: runs === expected });
      record(S, `${label} history ${history}: tasks run`, late.length, 'tasks', { text: `= ${N}`, ok: late.length === N });
      record(S, `${label} history ${history}: early`, late.filter((ms) => ms < 0).length, 'tasks', {
        text: '= 0',
        ok: late.every((ms) => ms >= 0),
      });
      p[history] = { p50: quantile(late, 0.5), p99: quantile(late, 0.99) };
      record(S, `${label} history ${history}: lateness p50`, p[history].p50, 'ms');
      record(S, `${label} history ${history}: lateness p99`, p[history].p99, 'ms');
    }
    record(S, `${label}: lateness p99, on − off`, p.on!.p99 - p.off!.p99, 'ms');
    record(S, `${label}: lateness p99, on / off`, p.on!.p99 / Math.max(1, p.off!.p99), '×');
    record(S, `${label}: lateness p50, on / off`, p.on!.p50 / Math.max(1, p.off!.p50), '×');
  }
}
described.B1d = `precision through the API: 20,000 and 100,000 \`close_order\` created by \`POST /tasks\` (64 clients), due over 10 s; orders of 1–3 goods among 1,000; this tree and ${BASELINE_COMMIT}, interleaved, medians`;

described.BT = `what tracing costs a firing: 100,000 \`close_order\` due over 10 s (10,000/s) inserted straight into the table, on ${TRACING_BEFORE} (before tracing), this tree with no exporter and no trace context, with a \`trace_parent\` on every task, and exporting spans over OTLP/HTTP to a local receiver; the server's CPU per firing over the window, interleaved, medians`;

// ── B2 ──────────────────────────────────────────────────────────────────────────────────────

/**
 * The honest baseline: what a shop would write by hand against the same table. Each connection
 * claims up to 50 due rows of \`tasks\` (\`FOR UPDATE SKIP LOCKED\`), closes their orders with
 * close_order's own statements (orders locked in order_sn order, then one UPDATE for the orders
 * and one for the goods in id order), marks the tasks done and commits; as many connections as
 * the service's pool. Answers tasks per second until none is due.
 */
async function claimLoop(db: BenchDb, connections: number): Promise<{ rate: number; count: number }> {
  const pool = mysql.createPool({ uri: db.url, connectionLimit: connections });
  pool.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => undefined));
  let count = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      const conn = await pool.getConnection();
      try {
        for (;;) {
          await conn.query('BEGIN');
          const [tasks] = await conn.query<mysql.RowDataPacket[]>(
            `SELECT id, JSON_UNQUOTE(JSON_EXTRACT(payload, '$.orderSn')) AS orderSn FROM punctual_tasks
              WHERE status = 'pending' AND run_at <= UTC_TIMESTAMP(3) ORDER BY run_at LIMIT 50 FOR UPDATE SKIP LOCKED`,
          );
          if (tasks.length === 0) {
            await conn.query('COMMIT');
            return;
          }
          const wanted = [...new Set(tasks.map((task) => String(task.orderSn)))].sort();
          const [orders] = await conn.query<mysql.RowDataPacket[]>(
            'SELECT id, status, items FROM orders WHERE order_sn IN (?) ORDER BY order_sn FOR UPDATE',
            [wanted],
          );
          const closing: number[] = [];
          const stock = new Map<number, number>();
          for (const order of orders) {
            if (order.status !== 'unpaid') continue;
            const items = (typeof order.items === 'string' ? JSON.parse(order.items) : order.items) as { goods_id: number; num: number }[];
            for (const item of items) stock.set(item.goods_id, (stock.get(item.goods_id) ?? 0) + item.num);
            closing.push(order.id);
          }
          if (closing.length > 0) await conn.query("UPDATE orders SET status = 'closed', closed_at = NOW(3) WHERE id IN (?)", [closing]);
          if (stock.size > 0) {
            const returns = [...stock].sort(([x], [y]) => x - y);
            await conn.query(
              `UPDATE goods SET stock = stock + CASE id ${returns.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE id IN (?) ORDER BY id`,
              [...returns.flat(), returns.map(([goodsId]) => goodsId)],
            );
          }
          await conn.query(
            "UPDATE punctual_tasks SET status = 'done', attempts = attempts + 1, finished_at = UTC_TIMESTAMP(3) WHERE id IN (?)",
            [tasks.map((task) => task.id)],
          );
          await conn.query('COMMIT');
          count += tasks.length;
        }
      } finally {
        conn.release();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await pool.end();
  return { rate: count / seconds, count };
}

described.B2 = 'overload: 100,000 `close_order` due within 5 s; baseline: a claim loop over the same table';
async function overload(db: BenchDb): Promise<void> {
  const S = 'B2';
  const N = 100_000;
  const LOOP = 50_000;
  await db.reset();
  await db.seedOrders(N + LOOP);
  const first = Date.now() + 20_000;
  await db.seedTasks(N, utcSql(first, `(seq - 1) % 5000`));
  const server = await startServer(db);
  let drain: number;
  try {
    await scrape(server);
    await waitUntil(async () => Date.now() >= first, 60_000, 'B2 tasks to come due', 50);
    await waitUntil(async () => (await doneCount(db)) === N, 300_000, 'B2 tasks to run', 250);
    await eventLoop(server, S);
    const [span] = await db.rows<{ first: Date; last: Date }>(
      "SELECT MIN(closed_at) AS first, MAX(closed_at) AS last FROM orders WHERE status = 'closed'",
    );
    const seconds = (span!.last.getTime() - first) / 1000;
    drain = N / seconds;
    record(S, 'drain time (due over 5 s)', seconds, 's');
    record(S, 'drain rate', drain, 'tasks/s');
    const late = await db.closeLateness();
    record(S, 'lateness p99', quantile(late, 0.99), 'ms');
    record(S, 'early', late.filter((ms) => ms < 0).length, 'tasks', { text: '= 0', ok: late.every((ms) => ms >= 0) });
    peakRss(server, S);
  } finally {
    await server.stop();
  }
  // The baseline's own tasks, all due already: it drains them as fast as it can.
  await db.seedTasks(LOOP, utcSql(Date.now() - 60_000), N + 1);
  const loop = await claimLoop(db, DEFAULT_POOL_SIZE);
  record(S, 'claim loop rate', loop.rate, 'tasks/s');
  record(S, 'claim loop tasks', loop.count, 'tasks', { text: `= ${LOOP}`, ok: loop.count === LOOP });
  record(S, 'drain ÷ claim loop', drain / loop.rate, '×', { text: '≥ 1.0×', ok: drain / loop.rate >= 1 });
  record(S, 'stock adds up', (await db.stockAddsUp()) ? 1 : 0, 'bool', { text: '= 1', ok: await db.stockAddsUp() });
}

// ── B3 ──────────────────────────────────────────────────────────────────────────────────────
described.B3 = 'boot: 1,000,000 pending within the horizon (node dist/app/main.js)';
async function boot(db: BenchDb): Promise<void> {
  const S = 'B3';
  const N = 1_000_000;
  await db.reset();
  const empty = await startServer(db, { inspect: true });
  const baseline = await heapAfterGc(empty);
  await empty.stop();
  // Due between 3 and 9 minutes from now: inside the 10-minute horizon, none fires meanwhile.
  const first = Date.now() + 3 * 60_000;
  await db.seedTasks(N, utcSql(first, `(seq - 1) * ${(6 * 60_000) / N}`));
  const server = await startServer(db, { inspect: true });
  try {
    const ready = (await (await fetch(`${server.baseUrl}/readyz`)).json()) as { armed: number };
    record(S, 'start to ready', server.readyMs / 1000, 's', { text: '≤ 15 s', ok: server.readyMs <= 15_000 });
    record(S, 'armed', ready.armed, 'tasks', { text: `= ${N}`, ok: ready.armed === N });
    const heap = await heapAfterGc(server);
    const perTask = (heap - baseline) / ready.armed;
    record(S, 'heap per armed task', perTask, 'bytes', { text: '≤ 400 bytes', ok: perTask <= 400 });
    peakRss(server, S);
  } finally {
    await server.stop();
  }
}

// ── B4 ──────────────────────────────────────────────────────────────────────────────────────
described.B4 = 'backlog: 5,000,000 pending over 30 days';
async function backlog(db: BenchDb): Promise<void> {
  const S = 'B4';
  const N = 5_000_000;
  await db.reset();
  const first = Date.now() + 60_000;
  const spread = 30 * 24 * 3600 * 1000;
  await db.seedTasks(N, utcSql(first, `(seq - 1) * ${spread / N}`));
  const server = await startServer(db);
  try {
    record(S, 'start to ready', server.readyMs / 1000, 's', { text: '≤ 10 s', ok: server.readyMs <= 10_000 });
    const ready = (await (await fetch(`${server.baseUrl}/readyz`)).json()) as { armed: number };
    record(S, 'armed', ready.armed, 'tasks');
    await sleep(5000); // a few refills
    peakRss(server, S, 200);
  } finally {
    await server.stop();
  }
}

// ── B5 ──────────────────────────────────────────────────────────────────────────────────────
/**
 * The baseline: multi-row INSERTs of the service's group-commit size, as many at once as the
 * service runs, each committed on its own (autocommit): rows per second.
 */
async function batchedInsertRate(db: BenchDb, seconds: number): Promise<number> {
  const pool = mysql.createPool({ uri: db.url, connectionLimit: INTAKE_BATCHES_RUNNING });
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: INTAKE_BATCHES_RUNNING }, async (_, worker) => {
      const conn = await pool.getConnection();
      try {
        for (let i = 0; performance.now() < deadline; i++) {
          const rows = Array.from({ length: INTAKE_BATCH }, (_, j) => [
            'close_order',
            JSON.stringify({ orderSn: `R${worker}-${i}-${j}` }),
            new Date(Date.now() + 3_600_000),
          ]);
          await conn.query('INSERT INTO punctual_tasks (type, payload, run_at) VALUES ?', [rows]);
          done += INTAKE_BATCH;
        }
      } finally {
        conn.release();
      }
    }),
  );
  await pool.end();
  return done / seconds;
}

described.B5 = `intake: \`POST /tasks\`, 50 connections, 15 s; baseline: ${INTAKE_BATCH}-row INSERTs, ${INTAKE_BATCHES_RUNNING} at a time, 15 s`;
async function intake(db: BenchDb): Promise<void> {
  const S = 'B5';
  const CONNECTIONS = 50;
  const SECONDS = 15;
  await db.reset();
  const server = await startServer(db);
  try {
    const raw = await batchedInsertRate(db, SECONDS);
    await db.exec('DELETE FROM punctual_tasks');
    record(S, `${INTAKE_BATCH}-row INSERT rate`, raw, 'rows/s');
    let sent = 0;
    const result = await autocannon({
      url: `${server.baseUrl}/tasks`,
      method: 'POST',
      connections: CONNECTIONS,
      duration: SECONDS,
      headers: { 'content-type': 'application/json' },
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({ type: 'close_order', payload: { orderSn: `I${sent++}` }, delayMs: 3_600_000 }),
          }),
        },
      ],
    });
    const acknowledged = result['2xx'];
    const rate = acknowledged / result.duration;
    const stored = await db.count('SELECT COUNT(*) AS n FROM punctual_tasks');
    record(S, 'POST /tasks rate', rate, 'req/s');
    record(S, 'POST ÷ batched INSERT', rate / raw, '×', { text: '≥ 0.5×', ok: rate / raw >= 0.5 });
    record(S, 'latency p99', result.latency.p99, 'ms', { text: '≤ 50 ms', ok: result.latency.p99 <= 50 });
    record(S, 'non-2xx answers', result.non2xx + result.errors, 'answers');
    record(S, 'stored − acknowledged', stored - acknowledged, 'rows', { text: '≥ 0 (none lost)', ok: stored >= acknowledged });
    peakRss(server, S);
  } finally {
    await server.stop();
  }
}

// ── B6 ──────────────────────────────────────────────────────────────────────────────────────
described.B6 = 'thundering herd: 50,000 due at the same millisecond';
async function herd(db: BenchDb): Promise<void> {
  const S = 'B6';
  const N = 50_000;
  await db.reset();
  await db.seedOrders(N);
  const at = Date.now() + 15_000;
  await db.seedTasks(N, utcSql(at));
  const server = await startServer(db);
  try {
    const latencies: number[] = [];
    let running = true;
    const prober = (async () => {
      while (running) {
        const started = performance.now();
        await fetch(`${server.baseUrl}/healthz`).then((response) => response.text());
        if (Date.now() >= at) latencies.push(performance.now() - started);
        await sleep(5);
      }
    })();
    await waitUntil(async () => Date.now() >= at && (await doneCount(db)) === N, 300_000, 'B6 tasks to run', 250);
    running = false;
    await prober;
    latencies.sort((a, b) => a - b);
    const [closed] = await db.rows<{ n: number }>("SELECT COUNT(*) AS n FROM orders WHERE status = 'closed'");
    record(S, 'orders closed once', Number(closed!.n), 'orders', {
      text: `= ${N}`,
      ok: Number(closed!.n) === N && (await db.stockAddsUp()),
    });
    const [span] = await db.rows<{ last: Date }>("SELECT MAX(closed_at) AS last FROM orders WHERE status = 'closed'");
    record(S, 'herd drained in', (span!.last.getTime() - at) / 1000, 's');
    record(S, '/healthz p99 during herd', quantile(latencies, 0.99), 'ms', { text: '≤ 50 ms', ok: quantile(latencies, 0.99) <= 50 });
    record(S, '/healthz max during herd', latencies[latencies.length - 1] ?? Number.NaN, 'ms');
    peakRss(server, S);
  } finally {
    await server.stop();
  }
}

described['B7 creates'] =
  'creates on a sharded fleet: 600 `close_order` created 400 ms ahead through each of 3 processes in turn; baseline: the same through 1 process owning every shard';
described.B11 =
  'priority wall: 50,000 `close_order` of low priority and 500 of high priority due at the same second; baseline: the 500 at the low priority';

// ── B7 ──────────────────────────────────────────────────────────────────────────────────────
/** BENCH_B7_TASKS makes it smaller on a busy machine. */
const B7_TASKS = Number(process.env.BENCH_B7_TASKS ?? 100_000);
described.B7 = `several instances: ${B7_TASKS.toLocaleString('en')} \`close_order\` due over 10 s, 1, 2 and 3 processes with SHARDING=on, and 3 with it off`;
/** Statements the server counted (the whole server's: anything else running on it counts too). */
async function statements(db: BenchDb): Promise<Map<string, number>> {
  const rows = await db.rows<{ Variable_name: string; Value: string }>(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_update', 'Com_insert', 'Com_delete', 'Com_commit', 'Com_rollback')",
  );
  return new Map(rows.map((row) => [row.Variable_name, Number(row.Value)]));
}
async function scaleOut(db: BenchDb): Promise<void> {
  const N = B7_TASKS;
  for (const [processes, sharding] of [
    [1, 'on'],
    [2, 'on'],
    [3, 'on'],
    [3, 'off'],
  ] as const) {
    const S = `B7 ${processes}p ${sharding}`;
    await db.reset();
    await db.seedOrders(N);
    const env = { SHARDING: sharding };
    const servers = await Promise.all(Array.from({ length: processes }, () => startServer(db, { env })));
    try {
      if (sharding === 'on') {
        await waitUntil(
          async () => {
            const held = await Promise.all(
              servers.map(async (server) => ((await (await fetch(`${server.baseUrl}/readyz`)).json()) as { shards: number }).shards),
            );
            return held.reduce((a, b) => a + b, 0) === 256;
          },
          30_000,
          `${S} shards to be shared out`,
        );
      }
      const first = Date.now() + 3000 + N / 5;
      await db.seedTasks(N, utcSql(first, `(seq - 1) * ${10_000 / N}`));
      if (Date.now() >= first) throw new Error(`seeding ${N} tasks outlasted the lead time`);
      const before = await statements(db);
      await waitUntil(async () => (await doneCount(db)) === N, 600_000, `${S} tasks to run`);
      const after = await statements(db);
      const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
      const late = await db.closeLateness();
      record(S, 'tasks run', late.length, 'tasks', { text: `= ${N}`, ok: late.length === N && (await db.stockAddsUp()) });
      record(S, 'lateness p50', quantile(late, 0.5), 'ms');
      record(S, 'lateness p99', quantile(late, 0.99), 'ms');
      const all = ['Com_select', 'Com_update', 'Com_insert', 'Com_delete'].reduce((sum, name) => sum + delta(name), 0);
      record(S, 'statements per firing', all / N, 'statements');
      record(S, 'SELECTs per firing', delta('Com_select') / N, 'statements');
      record(S, 'UPDATEs per firing', delta('Com_update') / N, 'statements');
      record(S, 'transactions per firing', (delta('Com_commit') + delta('Com_rollback')) / N, 'commits');
      const metrics = await Promise.all(servers.map((server) => scrape(server)));
      const sum = (name: string) => metrics.reduce((total, m) => total + (m.get(name) ?? 0), 0);
      record(S, 'empty claims', sum('punctual_empty_claims_total'), 'claims');
      record(S, 'fenced claims', sum('punctual_fenced_claims_total'), 'tasks');
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
    }
  }
}

described.B8 =
  'batch intake: 40 × `POST /tasks/batch` of 1,000 keyed, tagged tasks; baseline: the same rows as 1,000-row INSERTs on as many connections';

// ── B9 (b9-network.ts), B12 ─────────────────────────────────────────────────────────────────
described.B9 =
  "a database across the network: a delay proxy of 1, 2 and 5 ms each way before MariaDB; `close_order` due at 300/s and 1,000/s for 10 s; the floor (a `setTimeout` per task and a PHP consumer's close, one order per transaction) through the same proxy at 300/s";

described.B12 =
  'large pages: 8 clients read `GET /tasks/pending?limit=1000` over 1,000 tasks of 60 KB for 8 s; baseline: the same /healthz probe with no page load';
async function largePages(db: BenchDb): Promise<void> {
  const S = 'B12';
  const TASKS = 1000;
  const CLIENTS = 8;
  await db.reset();
  const note = 'x'.repeat(60 * 1024);
  for (let first = 0; first < TASKS; first += 50) {
    const batch = Array.from({ length: Math.min(50, TASKS - first) }, (_, i) => [
      'close_order',
      JSON.stringify({ orderSn: `BIG${first + i}`, note }),
      new Date(Date.now() + 86_400_000 + (first + i) * 1000), // a day away: listed, never armed
    ]);
    await db.exec('INSERT INTO punctual_tasks (type, payload, run_at) VALUES ?', [batch]);
  }
  const server = await startServer(db);
  try {
    const probe = async (until: number): Promise<number[]> => {
      const latencies: number[] = [];
      while (Date.now() < until) {
        const started = performance.now();
        await fetch(`${server.baseUrl}/healthz`).then((response) => response.text());
        latencies.push(performance.now() - started);
        await sleep(20);
      }
      return latencies.sort((a, b) => a - b);
    };
    const idle = await probe(Date.now() + 3000);
    const stopAt = Date.now() + 8000;
    let pages = 0;
    const client = async () => {
      while (Date.now() < stopAt) {
        await fetch(`${server.baseUrl}/tasks/pending?limit=1000`).then((response) => response.arrayBuffer());
        pages++;
      }
    };
    const [loaded] = await Promise.all([probe(stopAt), ...Array.from({ length: CLIENTS }, client)]);
    const extra = quantile(loaded, 0.99) - quantile(idle, 0.99);
    record(S, 'pages read', pages, 'pages');
    record(S, '/healthz p99 idle', quantile(idle, 0.99), 'ms');
    record(S, '/healthz p99 under page load', quantile(loaded, 0.99), 'ms');
    record(S, '/healthz p99 over idle', extra, 'ms', { text: '≤ 50 ms', ok: extra <= 50 });
    peakRss(server, S, 400);
  } finally {
    await server.stop();
  }
}

described.BW =
  "the database's work per firing: a batch's lock and mark-done (its runs on record in the rows) straight on one connection, 100,000 tasks, 50 a transaction; pages touched and written, redo bytes and the database server's CPU per task (purge included) as migrated, without the run history, with a row per successful run besides (before 0.2), and without each secondary index of `punctual_tasks` in turn; interleaved, medians of 3";
described.B10 =
  'pull workers: a waiting worker gets a task after its runAt at 1,000 tasks/s (p99), 8 workers drain a backlog (tasks/s); the same loads as webhooks';

described.B13 =
  'search on 1,000,000 tasks: `GET /tasks/search` by id, key, key part, tag (1,000 tasks) and a miss, and the last page and a jump to a due time by keyset, 30 times each over HTTP, p50 and p99';

described.lateness = `how late a timed task starts (start − due time), p50 and p99, at ${RATES.map((rate) => rate.toLocaleString('en')).join(', ')} due a second for ${SECONDS} s: punctual (a no-op \`database\` handler module) beside BullMQ (Redis), graphile-worker and pg-boss (PostgreSQL), each at its defaults, the same no-op handler, taking turns in one run; a task not started 15 s after the last due time counts as that late (at least)`;

const SCENARIOS: Record<string, (db: BenchDb) => Promise<void>> = {
  B0: startup,
  B1: precision('B1', 10_000, 10, 50),
  B1B: precision('B1b', 50_000, 10),
  B1C: precision('B1c', 100_000, 50),
  BH: historyCost,
  B1D: (db) => apiPrecision(db, record),
  BT: (db) => tracingCost(db, record),
  B2: overload,
  B3: boot,
  B4: backlog,
  B5: intake,
  B6: herd,
  B8: (db) => batchIntake(db, record),
  B7: scaleOut,
  B7C: (db) => shardedCreates(db, record),
  B9: (db) => network(db, record),
  B10: (db) => pullWorkers(db, record),
  B11: (db) => priorityWall(db, record),
  B12: largePages,
  BW: (db) => databaseWork(db, record),
  LATENESS: (db) => peerLateness(db, record),
  B13: (db) => search(db, record),
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).map((name) => name.toUpperCase());
  const names = wanted.length > 0 ? wanted : Object.keys(SCENARIOS);
  for (const name of names)
    if (!(name in SCENARIOS)) throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(' ')}`);
  console.log(
    `punctual bench: ${names.join(' ')} on ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  );
  const db = await BenchDb.create();
  try {
    for (const name of names) {
      const started = Date.now();
      console.log(`${name} …`);
      try {
        await SCENARIOS[name]!(db);
      } catch (error) {
        const label = Object.keys(described).find((key) => key.toUpperCase() === name) ?? name;
        record(label, 'error', 1, (error as Error).message, { text: 'no error', ok: false });
      }
      console.log(`${name} took ${Math.round((Date.now() - started) / 1000)} s`);
    }
  } finally {
    await db.drop();
  }
  console.log('');
  console.table(rows.map((row) => ({ ...row, ok: row.ok === undefined ? '' : row.ok ? 'yes' : 'NO' })));
  const machine = `${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')} at the end`;
  // A run of some scenarios replaces their rows and keeps the others' from earlier runs.
  const ran = new Set(rows.map((row) => row.scenario.toUpperCase()));
  let kept: Row[] = [];
  try {
    kept = (JSON.parse(readFileSync('bench-results.json', 'utf8')) as Results).rows.filter((row) => !ran.has(row.scenario.toUpperCase()));
  } catch {
    // no earlier results
  }
  writeFileSync(
    'bench-results.json',
    `${JSON.stringify({ at: new Date().toISOString(), node: process.version, machine, scenarios: described, rows: [...kept, ...rows] }, null, 2)}\n`,
  );
  console.log('figures written to bench-results.json');
}

await main();
