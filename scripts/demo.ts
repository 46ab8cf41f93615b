/**
 * npm run demo: what punctual does, in under a minute, against the service that is running.
 *
 * It sets up a small demo shop (tables `orders` and `goods`, marked as the demo's) in the
 * database DATABASE_URL names, schedules a few thousand close_order tasks due over the next
 * 15 seconds through the API (a third as naive local times in Asia/Shanghai), shows them close,
 * then prints how late they ran and checks that the stock adds up.
 *
 * PUNCTUAL_URL (default: the service's own HOST and PORT, as `npm start` reads them, so
 * http://127.0.0.1:3000 unless they are set), API_TOKEN, DATABASE_URL (the service's),
 * DEMO_TASKS (3000), DEMO_SECONDS (15).
 *
 * It talks to the service as a shop would, through the TypeScript client (clients/ts): a tool
 * beside the server, not part of it. `npm run demo` runs it compiled (scripts/demo.mjs), compiling
 * it only when its sources changed.
 */
import mysql from 'mysql2/promise';
import { Temporal } from 'temporal-polyfill';
import { PunctualClient, type CreateTask } from '../clients/ts/src/client.js';

const DEMO_COMMENT = 'punctual demo shop';
const GOODS = 20;

function setting(name: string, fallback: string): string {
  const value = process.env[name]?.trim();
  return value === undefined || value === '' ? fallback : value;
}

function count(name: string, fallback: number, min: number, max: number): number {
  const value = Number(setting(name, String(fallback)));
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer from ${min} to ${max}`);
  return value;
}

const say = (line: string) => process.stdout.write(`${line}\n`);

/**
 * Where the service listens: PUNCTUAL_URL, else the HOST and PORT the service reads from the same
 * environment (a wildcard HOST is reached on loopback).
 */
function serviceUrl(env: NodeJS.ProcessEnv = process.env): string {
  const url = env.PUNCTUAL_URL?.trim();
  if (url !== undefined && url !== '') return url.replace(/\/+$/, '');
  const host = env.HOST?.trim() || '127.0.0.1';
  const reachable =
    host === '0.0.0.0' || host === '::' || host === '[::]' ? '127.0.0.1' : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${reachable}:${env.PORT?.trim() || '3000'}`;
}

/** The demo's tables, created if missing; someone else's tables of the same names are left alone. */
async function prepareShop(db: mysql.Pool, orders: number): Promise<{ orderSn: string; items: { goods_id: number; num: number }[] }[]> {
  const [tables] = await db.query<(mysql.RowDataPacket & { name: string; comment: string })[]>(
    "SELECT TABLE_NAME AS name, TABLE_COMMENT AS comment FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('orders', 'goods')",
  );
  const foreign = tables.filter((table) => table.comment !== DEMO_COMMENT);
  if (foreign.length > 0) {
    throw new Error(
      `this database already has a table ${foreign.map((table) => table.name).join(' and ')} that is not the demo's; ` +
        'run the demo against a punctual whose DATABASE_URL is a database of its own',
    );
  }
  await db.query(`CREATE TABLE IF NOT EXISTS goods (id BIGINT UNSIGNED PRIMARY KEY, stock INT NOT NULL) COMMENT = '${DEMO_COMMENT}'`);
  await db.query(`CREATE TABLE IF NOT EXISTS orders (
      id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL UNIQUE,
      status VARCHAR(16) NOT NULL DEFAULT 'unpaid', items JSON NOT NULL, closed_at DATETIME(3) NULL) COMMENT = '${DEMO_COMMENT}'`);
  await db.query('DELETE FROM orders');
  await db.query('DELETE FROM goods');
  await db.query('INSERT INTO goods (id, stock) VALUES ?', [Array.from({ length: GOODS }, (_, i) => [i + 1, 0])]);
  const run = Date.now().toString(36);
  const shop = Array.from({ length: orders }, (_, i) => ({
    orderSn: `DEMO-${run}-${String(i + 1).padStart(5, '0')}`,
    items: Array.from({ length: 1 + (i % 3) }, (_, j) => ({ goods_id: 1 + ((i * 7 + j * 3) % GOODS), num: 1 + ((i + j) % 4) })),
  }));
  for (let i = 0; i < shop.length; i += 1000) {
    const rows = shop.slice(i, i + 1000).map((order) => [order.orderSn, JSON.stringify(order.items)]);
    await db.query('INSERT INTO orders (order_sn, items) VALUES ?', [rows]);
  }
  return shop;
}

/** The create for order `i` of `n`, due across the window starting at `first`: three ways of saying when. */
function closeOrder(orderSn: string, i: number, n: number, first: number, windowMs: number): CreateTask {
  const due = first + Math.floor((i * windowMs) / n);
  const base = { type: 'close_order', payload: { orderSn }, key: `demo:${orderSn}` };
  if (i % 3 === 0) {
    // The shop thinks in Shanghai time: a naive local time, read in Asia/Shanghai.
    const local = Temporal.Instant.fromEpochMilliseconds(due).toZonedDateTimeISO('Asia/Shanghai').toPlainDateTime();
    return { ...base, runAt: local.toString({ fractionalSecondDigits: 3 }).replace('T', ' '), timezone: 'Asia/Shanghai' };
  }
  if (i % 3 === 1) return { ...base, runAt: new Date(due).toISOString() };
  return { ...base, delayMs: Math.max(0, due - Date.now()) };
}

function bar(done: number, total: number): string {
  const width = 40;
  const filled = Math.round((done / total) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} closed`;
}

async function main(): Promise<number> {
  const tasks = count('DEMO_TASKS', 3000, 1, 100_000);
  const seconds = count('DEMO_SECONDS', 15, 1, 600);
  const client = new PunctualClient({
    baseUrl: serviceUrl(),
    token: process.env.API_TOKEN || undefined,
  });
  if (!(await client.ready().catch(() => false))) {
    say(`punctual does not answer at ${serviceUrl()}: start it first (npm start), or set PUNCTUAL_URL (or PORT) to where it listens`);
    return 1;
  }
  const db = mysql.createPool({ uri: setting('DATABASE_URL', 'mysql://root@127.0.0.1:3306/punctual'), timezone: 'Z', connectionLimit: 4 });
  db.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => undefined));
  try {
    const shop = await prepareShop(db, tasks);
    say(`demo shop ready: ${tasks} unpaid orders over ${GOODS} goods`);

    const first = Date.now() + 2000;
    const bodies = shop.map((order, i) => closeOrder(order.orderSn, i, tasks, first, seconds * 1000));
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < bodies.length) await client.create(bodies[next++]!);
      }),
    );
    say(`scheduled ${tasks} close_order tasks due over the next ${seconds} s (a third as naive Asia/Shanghai times)`);

    const deadline = first + seconds * 1000 + 30_000;
    let closed = 0;
    while (closed < tasks && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const [[row]] = await db.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM orders WHERE status = 'closed'");
      closed = Number(row?.n);
      process.stdout.write(`\r${bar(closed, tasks)}`);
    }
    process.stdout.write('\n');

    const [late] = await db.query<mysql.RowDataPacket[]>(
      `SELECT TIMESTAMPDIFF(MICROSECOND, t.run_at, o.closed_at) / 1000 AS ms FROM punctual_tasks t
         JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))
        WHERE t.task_key IN (?) AND o.closed_at IS NOT NULL`,
      [shop.map((order) => `demo:${order.orderSn}`)],
    );
    const finish = late.map((row) => Number(row.ms)).sort((a, b) => a - b);
    // The start's lateness, from the run history: what the dashboard and punctual_task_lateness_seconds count
    // (start − run_at − the run's wait for a pause or a limit, which is shown apart). A successful run is
    // on record in its task's row (done_by names its process).
    const [runs] = await db
      .query<mysql.RowDataPacket[]>(
        `SELECT lateness_ms AS ms, waited_ms AS waited FROM punctual_tasks
          WHERE task_key IN (?) AND status = 'done' AND done_by IS NOT NULL`,
        [shop.map((order) => `demo:${order.orderSn}`)],
      )
      .catch(() => [[]] as mysql.RowDataPacket[][]);
    const start = runs.map((row) => Number(row.ms)).sort((a, b) => a - b);
    const at = (values: number[], q: number) => values[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)] ?? Number.NaN;
    const figures = (values: number[]) => `p50 ${at(values, 0.5)} ms, p99 ${at(values, 0.99)} ms, max ${at(values, 1)} ms`;
    const waits = runs
      .map((row) => Number(row.waited))
      .filter((ms) => ms > 0)
      .sort((a, b) => a - b);
    if (start.length > 0) {
      say(`start lateness (run start − run_at − wait, as the dashboard and the metrics count it): ${figures(start)}`);
      say(
        waits.length === 0 ? 'waits for a pause or a limit: none' : `waits for a pause or a limit: ${waits.length} runs, ${figures(waits)}`,
      );
    } else say('start lateness: no run history (RUN_HISTORY=off)');
    say(`finish lateness (closed_at − run_at): ${figures(finish)}, early ${finish.filter((ms) => ms < 0).length}`);

    const expected = new Map<number, number>();
    for (const order of shop) for (const item of order.items) expected.set(item.goods_id, (expected.get(item.goods_id) ?? 0) + item.num);
    const [stock] = await db.query<mysql.RowDataPacket[]>('SELECT id, stock FROM goods');
    const adds = closed === tasks && stock.every((row) => row.stock === (expected.get(Number(row.id)) ?? 0));
    say(adds ? `stock adds up: every closed order put its items back exactly once` : `stock does not add up (${closed}/${tasks} closed)`);
    return adds ? 0 : 1;
  } finally {
    await db.end();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`demo failed: ${(error as Error).message}`);
    process.exit(1);
  },
);
