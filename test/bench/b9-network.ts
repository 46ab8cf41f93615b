/**
 * B9: a database across the network. A delay proxy (test/helpers/proxy.ts with delayMs) of 1, 2 and 5 ms each way
 * sits between punctual and MariaDB; `close_order` tasks come due at 300/s and at 1,000/s for 10 s
 * (inserted straight into the table, armed by the refill). The floor goes through the same proxy in the same
 * run, at 300/s: a bare `setTimeout` per task and the seeds' close (BEGIN; the order locked; the
 * order closed; its goods back in stock; the task done; COMMIT), on 50 connections. The proxy runs
 * in the bench's process, as the floor does: on a busy machine both feel it.
 * Lateness is `orders.closed_at − tasks.run_at`, also counted in round trips (a `SELECT 1`
 * through the proxy, median); requests per firing are the chunks the proxy carried to the
 * database over the window, divided by the tasks.
 */
import mysql from 'mysql2/promise';
import { Proxy } from '../helpers/proxy.js';
import { type BenchDb, quantile, sleep, startServer, utcSql, waitUntil } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const S = 'B9';
const WINDOW_MS = 10_000;
/** The floor's connections: enough that one order per transaction keeps up with the rate. */
const FLOOR_POOL = 50;

async function roundTripMs(url: string): Promise<number> {
  const conn = await mysql.createConnection({ uri: url });
  try {
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      await conn.query('SELECT 1');
      times.push(performance.now() - started);
    }
    return quantile(
      times.sort((a, b) => a - b),
      0.5,
    );
  } finally {
    await conn.end();
  }
}

interface Run {
  late: number[];
  requests: number;
}

async function lateness(db: BenchDb, N: number): Promise<number[]> {
  await waitUntil(
    async () => (await db.count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'")) === N,
    120_000,
    'B9 tasks to run',
  );
  return db.closeLateness();
}

async function punctual(db: BenchDb, proxy: Proxy, N: number): Promise<Run> {
  await db.reset();
  await db.seedOrders(N);
  const server = await startServer(db, { databaseUrl: proxy.url(db.name) });
  try {
    const first = Date.now() + 4000;
    await db.seedTasks(N, utcSql(first, `(seq - 1) * ${WINDOW_MS / N}`));
    await sleep(first - 200 - Date.now());
    const before = proxy.requests;
    const late = await lateness(db, N);
    return { late, requests: proxy.requests - before };
  } finally {
    await server.stop();
  }
}

/** The seeds' close of one order, per task, on its own timer. */
async function floor(db: BenchDb, proxy: Proxy, N: number): Promise<Run> {
  await db.reset();
  await db.seedOrders(N);
  const first = Date.now() + 3000;
  await db.seedTasks(N, utcSql(first, `(seq - 1) * ${WINDOW_MS / N}`));
  const tasks = await db.rows<{ id: number; runAt: number; orderSn: string }>(
    `SELECT id, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', run_at) DIV 1000 AS runAt, JSON_VALUE(payload, '$.orderSn') AS orderSn FROM punctual_tasks`,
  );
  const pool = mysql.createPool({ uri: proxy.url(db.name), connectionLimit: FLOOR_POOL });
  pool.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => undefined));
  // Open the pool's connections before the window, as a running service has them.
  await Promise.all(Array.from({ length: FLOOR_POOL }, async () => (await pool.getConnection()).release()));
  const before = proxy.requests;
  const close = async (task: { id: number; orderSn: string }) => {
    const conn = await pool.getConnection();
    try {
      await conn.query('BEGIN');
      const [[order]] = await conn.query<mysql.RowDataPacket[]>('SELECT id, status, items FROM orders WHERE order_sn = ? FOR UPDATE', [
        task.orderSn,
      ]);
      if (order?.status === 'unpaid') {
        await conn.query("UPDATE orders SET status = 'closed', closed_at = NOW(3) WHERE id = ?", [order.id]);
        const items = (typeof order.items === 'string' ? JSON.parse(order.items) : order.items) as { goods_id: number; num: number }[];
        const stock = new Map<number, number>();
        for (const item of items) stock.set(item.goods_id, (stock.get(item.goods_id) ?? 0) + item.num);
        const returns = [...stock].sort(([a], [b]) => a - b);
        await conn.query(
          `UPDATE goods SET stock = stock + CASE id ${returns.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE id IN (?) ORDER BY id`,
          [...returns.flat(), returns.map(([goodsId]) => goodsId)],
        );
      }
      await conn.query("UPDATE punctual_tasks SET status = 'done', finished_at = UTC_TIMESTAMP(3) WHERE id = ?", [task.id]);
      await conn.query('COMMIT');
    } finally {
      conn.release();
    }
  };
  const done: Promise<void>[] = [];
  for (const task of tasks) {
    done.push(
      new Promise<void>((resolve, reject) => {
        const wait = () => {
          const left = task.runAt - Date.now();
          if (left > 0) setTimeout(wait, left);
          else close(task).then(resolve, reject);
        };
        wait();
      }),
    );
  }
  await Promise.all(done);
  const requests = proxy.requests - before;
  await pool.end();
  return { late: await lateness(db, N), requests };
}

export async function network(db: BenchDb, record: Record): Promise<void> {
  for (const delayMs of (process.env.BENCH_B9_DELAYS ?? '1,2,5').split(',').map(Number)) {
    const proxy = await new Proxy({ delayMs }).start();
    try {
      const rtt = await roundTripMs(proxy.url(db.name));
      const at = `${delayMs} ms each way`;
      record(S, `SELECT 1 round trip, ${at}`, rtt, 'ms');
      for (const [side, run, rate] of [
        ['punctual', punctual, 300],
        ['floor', floor, 300],
        ['punctual', punctual, 1000],
      ] as const) {
        const N = (rate * WINDOW_MS) / 1000;
        const { late, requests } = await run(db, proxy, N);
        const p50 = quantile(late, 0.5);
        const p99 = quantile(late, 0.99);
        const label = `${side}, ${rate.toLocaleString('en')}/s, ${at}`;
        const targets = side === 'punctual' && delayMs === 1 && rate === 1000;
        record(S, `tasks run, ${label}`, late.length, 'tasks', { text: `= ${N}`, ok: late.length === N && (await db.stockAddsUp()) });
        record(S, `early, ${label}`, late.filter((ms) => ms < 0).length, 'tasks', { text: '= 0', ok: late.every((ms) => ms >= 0) });
        record(
          S,
          `lateness p50, ${label}`,
          p50,
          'ms',
          targets ? { text: `≤ 2 round trips + 2 ms (${(2 * rtt + 2).toFixed(1)} ms)`, ok: p50 <= 2 * rtt + 2 } : undefined,
        );
        record(
          S,
          `lateness p99, ${label}`,
          p99,
          'ms',
          targets ? { text: `≤ 4 round trips + 5 ms (${(4 * rtt + 5).toFixed(1)} ms)`, ok: p99 <= 4 * rtt + 5 } : undefined,
        );
        record(S, `lateness p50 in round trips, ${label}`, p50 / rtt, 'round trips');
        record(S, `requests per firing, ${label}`, requests / N, 'requests');
      }
    } finally {
      await proxy.stop();
    }
  }
}
