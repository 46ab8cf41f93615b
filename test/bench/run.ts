/**
 * npm run bench [-- B1 B3 …]: the scenarios of the performance issue against the local MariaDB.
 * Each starts the real server (dist/main.js, default settings) and talks to it only over HTTP
 * and through the database. Ratios compare two things measured in the same run. Prints one
 * table and writes the same figures to bench-results.json.
 */
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import autocannon from 'autocannon';
import mysql from 'mysql2/promise';
import { batchIntake } from './b8-batch.js';
import { BenchDb, heapAfterGc, memoryOf, quantile, scrape, type Server, sleep, startServer, utcSql, waitUntil } from './lib.js';

interface Row {
  scenario: string;
  metric: string;
  value: number;
  unit: string;
  target?: string;
  ok?: boolean;
}

const rows: Row[] = [];
const DEFAULT_CONCURRENCY = 4; // CONCURRENCY's default: the plain loop gets as many connections

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
  return db.count("SELECT COUNT(*) AS n FROM tasks WHERE status = 'done'");
}

// ── B1 ──────────────────────────────────────────────────────────────────────────────────────
async function precision(db: BenchDb): Promise<void> {
  const S = 'B1';
  const N = 10_000;
  await db.reset();
  await db.seedOrders(N);
  const server = await startServer(db);
  try {
    await scrape(server); // resets the event-loop histogram
    const first = Date.now() + 3000;
    // Due uniformly over 10 s, inserted straight into the table; the refill arms them.
    await db.seedTasks(N, utcSql(first, `(seq - 1) * ${10_000 / N}`));
    await waitUntil(async () => (await doneCount(db)) === N, 60_000, 'B1 tasks to run');
    await eventLoop(server, S);
    const late = await db.closeLateness();
    record(S, 'tasks run', late.length, 'tasks', { text: `= ${N}`, ok: late.length === N });
    record(S, 'early', late.filter((ms) => ms < 0).length, 'tasks', { text: '= 0', ok: late.every((ms) => ms >= 0) });
    record(S, 'lateness p50', quantile(late, 0.5), 'ms');
    record(S, 'lateness p99', quantile(late, 0.99), 'ms', { text: '≤ 10 ms', ok: quantile(late, 0.99) <= 10 });
    record(S, 'lateness max', late[late.length - 1]!, 'ms', { text: '≤ 50 ms', ok: late[late.length - 1]! <= 50 });
    peakRss(server, S);
  } finally {
    await server.stop();
  }
}

// ── B2 ──────────────────────────────────────────────────────────────────────────────────────

/** The seeds' close, run by the bench itself: SELECT … FOR UPDATE, then the UPDATEs, per order. */
async function plainLoop(db: BenchDb, from: number, count: number, connections: number): Promise<number> {
  const pool = mysql.createPool({ uri: db.url, connectionLimit: connections });
  pool.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => undefined));
  let next = from;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      const conn = await pool.getConnection();
      try {
        while (next < from + count) {
          const orderSn = `B${next++}`;
          await conn.query('BEGIN');
          const [[order]] = await conn.query<mysql.RowDataPacket[]>('SELECT id, status, items FROM orders WHERE order_sn = ? FOR UPDATE', [
            orderSn,
          ]);
          if (order !== undefined && order.status === 'unpaid') {
            await conn.query("UPDATE orders SET status = 'closed', closed_at = NOW(3) WHERE id = ?", [order.id]);
            const items = (typeof order.items === 'string' ? JSON.parse(order.items) : order.items) as { goods_id: number; num: number }[];
            for (const item of [...items].sort((a, b) => a.goods_id - b.goods_id)) {
              await conn.query('UPDATE goods SET stock = stock + ? WHERE id = ?', [item.num, item.goods_id]);
            }
          }
          await conn.query('COMMIT');
        }
      } finally {
        conn.release();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await pool.end();
  return count / seconds;
}

async function overload(db: BenchDb): Promise<void> {
  const S = 'B2';
  const N = 100_000;
  const LOOP = 20_000;
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
  const loop = await plainLoop(db, N + 1, LOOP, DEFAULT_CONCURRENCY);
  record(S, 'plain loop rate', loop, 'closes/s');
  record(S, 'drain ÷ plain loop', drain / loop, '×', { text: '≥ 1.0×', ok: drain / loop >= 1 });
  record(S, 'stock adds up', (await db.stockAddsUp()) ? 1 : 0, 'bool', { text: '= 1', ok: await db.stockAddsUp() });
}

// ── B3 ──────────────────────────────────────────────────────────────────────────────────────
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
async function rawInsertRate(db: BenchDb, connections: number, seconds: number): Promise<number> {
  const pool = mysql.createPool({ uri: db.url, connectionLimit: connections });
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: connections }, async (_, worker) => {
      const conn = await pool.getConnection();
      try {
        for (let i = 0; performance.now() < deadline; i++) {
          await conn.query("INSERT INTO tasks (type, payload, run_at) VALUES ('close_order', ?, UTC_TIMESTAMP(3) + INTERVAL 1 HOUR)", [
            JSON.stringify({ orderSn: `R${worker}-${i}` }),
          ]);
          done++;
        }
      } finally {
        conn.release();
      }
    }),
  );
  await pool.end();
  return done / seconds;
}

async function intake(db: BenchDb): Promise<void> {
  const S = 'B5';
  const CONNECTIONS = 50;
  await db.reset();
  const server = await startServer(db);
  try {
    const raw = await rawInsertRate(db, CONNECTIONS, 10);
    await db.exec('DELETE FROM tasks');
    record(S, 'raw INSERT rate', raw, 'rows/s');
    let sent = 0;
    const result = await autocannon({
      url: `${server.baseUrl}/tasks`,
      method: 'POST',
      connections: CONNECTIONS,
      duration: 20,
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
    const stored = await db.count('SELECT COUNT(*) AS n FROM tasks');
    record(S, 'POST /tasks rate', rate, 'req/s');
    record(S, 'POST ÷ raw INSERT', rate / raw, '×', { text: '≥ 0.5×', ok: rate / raw >= 0.5 });
    record(S, 'latency p99', result.latency.p99, 'ms', { text: '≤ 50 ms', ok: result.latency.p99 <= 50 });
    record(S, 'non-2xx answers', result.non2xx + result.errors, 'answers');
    record(S, 'stored − acknowledged', stored - acknowledged, 'rows', { text: '≥ 0 (none lost)', ok: stored >= acknowledged });
    peakRss(server, S);
  } finally {
    await server.stop();
  }
}

// ── B6 ──────────────────────────────────────────────────────────────────────────────────────
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

const SCENARIOS: Record<string, (db: BenchDb) => Promise<void>> = {
  B1: precision,
  B2: overload,
  B3: boot,
  B4: backlog,
  B5: intake,
  B6: herd,
  B8: (db) => batchIntake(db, record),
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
        record(name, 'error', 1, (error as Error).message, { text: 'no error', ok: false });
      }
      console.log(`${name} took ${Math.round((Date.now() - started) / 1000)} s`);
    }
  } finally {
    await db.drop();
  }
  console.log('');
  console.table(rows.map((row) => ({ ...row, ok: row.ok === undefined ? '' : row.ok ? 'yes' : 'NO' })));
  writeFileSync('bench-results.json', `${JSON.stringify({ at: new Date().toISOString(), node: process.version, rows }, null, 2)}\n`);
  console.log('figures written to bench-results.json');
}

await main();
