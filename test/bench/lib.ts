/**
 * What the benchmarks share: a database of their own, the shop's tables, fast seeding, the real
 * server as a child process (only HTTP and the database between them), and small statistics.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import WebSocket from 'ws';
import { migrateDatabase } from '../../src/db/migrate.js';
import { parsePrometheus } from '../helpers/prometheus.js';

/** BENCH_MAIN: another build's main.js (a build of an earlier commit, to compare in one sitting). */
const MAIN = process.env.BENCH_MAIN ?? fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));
export const SERVER_URL = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

/** One figure of a scenario, as bench-results.json stores it. */
export interface Row {
  scenario: string;
  metric: string;
  value: number;
  unit: string;
  target?: string;
  ok?: boolean;
}

/** bench-results.json: what the last `npm run bench` measured. */
export interface Results {
  at: string;
  node?: string;
  machine?: string;
  scenarios?: Record<string, string>;
  rows: Row[];
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ── the database ──────────────────────────────────────────────────────────────────────────

export class BenchDb {
  readonly url: string;
  pool: mysql.Pool;
  #mariadb = false;

  private constructor(readonly name: string) {
    this.url = `${SERVER_URL.replace(/\/$/, '')}/${name}`;
    this.pool = this.#newPool();
  }

  static async create(): Promise<BenchDb> {
    // A bench run that was killed leaves its database behind: drop those over an hour old.
    await BenchDb.#onServer(async (conn) => {
      const [rows] = await conn.query<mysql.RowDataPacket[]>("SHOW DATABASES LIKE 'punctual\\_bench\\_%'");
      for (const row of rows) {
        const name = String(Object.values(row)[0]);
        const born = Number(/^punctual_bench_(\d{10})_/.exec(name)?.[1]);
        if (born > 0 && Date.now() / 1000 - born > 3600) await conn.query(`DROP DATABASE \`${name}\``);
      }
    });
    const db = new BenchDb(`punctual_bench_${Math.floor(Date.now() / 1000)}_${randomBytes(3).toString('hex')}`);
    await db.reset();
    return db;
  }

  #newPool(): mysql.Pool {
    const pool = mysql.createPool({ uri: this.url, timezone: 'Z', connectionLimit: 60, multipleStatements: false });
    pool.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => undefined));
    return pool;
  }

  static async #onServer<T>(fn: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    const conn = await mysql.createConnection({ uri: SERVER_URL });
    try {
      return await fn(conn);
    } finally {
      await conn.end();
    }
  }

  #server<T>(fn: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    return BenchDb.#onServer(fn);
  }

  /**
   * A fresh, empty database: the shop's tables, and punctual's (migrated here, as the server
   * would at start, so tasks can be inserted before a server runs).
   */
  async reset(goodsCount = 100, migrate = true): Promise<void> {
    await this.pool.end().catch(() => undefined);
    await this.#server(async (conn) => {
      await conn.query(`DROP DATABASE IF EXISTS \`${this.name}\``);
      await conn.query(`CREATE DATABASE \`${this.name}\` CHARACTER SET utf8mb4`);
      const [[version]] = await conn.query<mysql.RowDataPacket[]>('SELECT VERSION() AS v');
      this.#mariadb = String(version?.v).includes('MariaDB');
    });
    this.pool = this.#newPool();
    // Without: the server migrates at its start (another commit's server, with its own migrations).
    if (migrate) await migrateDatabase(this.url, this.name);
    await this.exec('CREATE TABLE goods (id BIGINT UNSIGNED PRIMARY KEY, stock INT NOT NULL)');
    await this.exec(`CREATE TABLE orders (
      id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL UNIQUE,
      status VARCHAR(16) NOT NULL DEFAULT 'unpaid', items JSON NOT NULL, closed_at DATETIME(3) NULL)`);
    await this.exec(`INSERT INTO goods (id, stock) SELECT seq, 0 FROM ${this.numbers(goodsCount)}`);
  }

  async drop(): Promise<void> {
    await this.pool.end().catch(() => undefined);
    await this.#server((conn) => conn.query(`DROP DATABASE IF EXISTS \`${this.name}\``));
  }

  /** A derived table of integers 1..n in a column `seq`. */
  numbers(n: number, from = 1): string {
    if (this.#mariadb) return `seq_${from}_to_${from + n - 1} AS numbers`;
    // MySQL: digits cross-joined, enough for 10^7.
    const digits =
      '(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
    const parts = Array.from({ length: 7 }, (_, i) => `${digits} d${i}`).join(' CROSS JOIN ');
    const value = Array.from({ length: 7 }, (_, i) => `d${i}.d * ${10 ** i}`).join(' + ');
    return `(SELECT ${from} + ${value} AS seq FROM ${parts} HAVING seq < ${from + n}) AS numbers`;
  }

  async exec(sql: string, values?: unknown[]): Promise<mysql.ResultSetHeader> {
    const [result] = await this.pool.query<mysql.ResultSetHeader>(sql, values);
    return result;
  }

  async rows<T = any>(sql: string, values?: unknown[]): Promise<T[]> {
    const [rows] = await this.pool.query<mysql.RowDataPacket[]>(sql, values);
    return rows as T[];
  }

  /** Unpaid orders B<from>..B<from+n-1>, each with one to three items over the goods. */
  async seedOrders(n: number, from = 1, goodsCount = 100): Promise<void> {
    for (let start = from; start < from + n; start += 500_000) {
      const size = Math.min(500_000, from + n - start);
      await this.exec(
        `INSERT INTO orders (order_sn, items)
         SELECT CONCAT('B', seq), IF(seq % 3 = 0,
           JSON_ARRAY(JSON_OBJECT('goods_id', 1 + seq % ${goodsCount}, 'num', 1 + seq % 5)),
           JSON_ARRAY(JSON_OBJECT('goods_id', 1 + seq % ${goodsCount}, 'num', 1 + seq % 5),
                      JSON_OBJECT('goods_id', 1 + (seq * 7) % ${goodsCount}, 'num', 2)))
         FROM ${this.numbers(size, start)}`,
      );
    }
  }

  /**
   * close_order tasks for orders B<from>.., inserted straight into the table the way a shop may,
   * due at `runAtSql` (an SQL expression over `seq`, in UTC).
   */
  async seedTasks(n: number, runAtSql: string, from = 1): Promise<void> {
    for (let start = from; start < from + n; start += 500_000) {
      const size = Math.min(500_000, from + n - start);
      await this.exec(
        `INSERT INTO punctual_tasks (type, payload, run_at)
         SELECT 'close_order', JSON_OBJECT('orderSn', CONCAT('B', seq)), ${runAtSql}
         FROM ${this.numbers(size, start)}`,
      );
    }
  }

  async count(sql: string, values?: unknown[]): Promise<number> {
    const [row] = await this.rows<{ n: number }>(sql, values);
    return Number(row?.n ?? 0);
  }

  /** Lateness of closed orders in ms (closed_at − run_at), sorted; `tasks`: the tasks table's name (a release before 0.2 named it `tasks`). */
  async closeLateness(tasks = 'punctual_tasks'): Promise<number[]> {
    const rows = await this.rows<{ late: string }>(
      `SELECT TIMESTAMPDIFF(MICROSECOND, t.run_at, o.closed_at) / 1000 AS late
         FROM ${tasks} t JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))
        WHERE o.closed_at IS NOT NULL`,
    );
    return rows.map((row) => Number(row.late)).sort((a, b) => a - b);
  }

  /** Stock must equal the items of the closed orders, counted once. */
  async stockAddsUp(): Promise<boolean> {
    const [row] = await this.rows<{ expected: string; actual: string }>(
      `SELECT
         (SELECT COALESCE(SUM(jt.num), 0) FROM orders o,
            JSON_TABLE(o.items, '$[*]' COLUMNS (num INT PATH '$.num')) jt WHERE o.status = 'closed') AS expected,
         (SELECT COALESCE(SUM(stock), 0) FROM goods) AS actual`,
    );
    return Number(row?.expected) === Number(row?.actual);
  }
}

// ── the server ────────────────────────────────────────────────────────────────────────────

export interface Server {
  child: ChildProcess;
  baseUrl: string;
  /** ms from spawn to "punctual is ready". */
  readyMs: number;
  inspectorUrl?: string;
  stop(): Promise<number | null>;
}

/** Starts dist/app/main.js with its defaults (but the database and a free port). */
export async function startServer(
  db: BenchDb,
  options: { inspect?: boolean; env?: Record<string, string>; main?: string; databaseUrl?: string; nodeArgs?: string[] } = {},
): Promise<Server> {
  const started = performance.now();
  const main = options.main ?? MAIN;
  // BENCH_NODE_ARGS: flags for the server's node, e.g. `--cpu-prof --cpu-prof-dir=…` to see where its time goes.
  // BENCH_SERVER_ENV: settings for every server of the run, e.g. `RUN_HISTORY=off`, to see what a feature costs.
  const extraEnv = Object.fromEntries(
    (process.env.BENCH_SERVER_ENV ?? '')
      .split(' ')
      .filter(Boolean)
      .map((pair) => {
        const at = pair.indexOf('=');
        if (at < 1) throw new Error(`BENCH_SERVER_ENV: ${JSON.stringify(pair)} is not NAME=value`);
        return [pair.slice(0, at), pair.slice(at + 1)];
      }),
  );
  const nodeArgs = options.nodeArgs ?? process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const args = [...nodeArgs, ...(options.inspect ? ['--inspect=127.0.0.1:0', main] : [main])];
  const child = spawn(process.execPath, args, {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: options.databaseUrl ?? db.url, PORT: '0', ...extraEnv, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let inspectorUrl: string | undefined;
  const errors: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    const match = /Debugger listening on (ws:\/\/\S+)/.exec(line);
    if (match) inspectorUrl = match[1];
    else errors.push(line);
  });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      // The message, not the line: the listening line quotes "punctual is ready" as what to wait for.
      if (!line.startsWith('{')) return;
      const entry = JSON.parse(line) as { msg?: string; address?: string };
      if (entry.msg === 'punctual is ready') resolve(String(entry.address));
    });
    void exited.then((code) => reject(new Error(`server exited with ${code}: ${errors.join('\n')}`)));
  });
  const readyMs = performance.now() - started;
  return {
    child,
    baseUrl,
    readyMs,
    inspectorUrl,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Peak and current resident memory of a process, in MB (Linux). */
export function memoryOf(pid: number): { peakMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return { peakMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024 };
}

/** The server's metrics, parsed: name{labels} → value. */
export async function scrape(server: Server): Promise<Map<string, number>> {
  return parsePrometheus(await (await fetch(`${server.baseUrl}/metrics`)).text());
}

/** V8 heap in use after a full GC, through the inspector (the server must run with inspect). */
export async function heapAfterGc(server: Server): Promise<number> {
  if (server.inspectorUrl === undefined) throw new Error('the server was not started with the inspector');
  const socket = new WebSocket(server.inspectorUrl);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  let id = 0;
  const call = (method: string) =>
    new Promise<any>((resolve) => {
      const mine = ++id;
      const onMessage = (data: WebSocket.RawData) => {
        const message = JSON.parse((data as Buffer).toString());
        if (message.id !== mine) return;
        socket.off('message', onMessage);
        resolve(message.result);
      };
      socket.on('message', onMessage);
      socket.send(JSON.stringify({ id: mine, method }));
    });
  await call('HeapProfiler.collectGarbage');
  await call('HeapProfiler.collectGarbage');
  const usage = await call('Runtime.getHeapUsage');
  socket.close();
  return usage.usedSize as number;
}

// ── numbers ───────────────────────────────────────────────────────────────────────────────

/** The q-quantile (0..1) of sorted values. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** The median of values in any order (of an even count, the lower middle one). */
export function median(values: number[]): number {
  return quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

export async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string, everyMs = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** SQL for the UTC DATETIME of epoch milliseconds `ms` plus `extraSql` (an expression, in ms). */
export function utcSql(ms: number, extraSql = '0'): string {
  return `TIMESTAMP'1970-01-01 00:00:00' + INTERVAL (${ms} + ${extraSql}) * 1000 MICROSECOND`;
}

// ── `npm start`, as a shop starts it ──────────────────────────────────────────────────────

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A TCP port free right now (bound to port 0, then let go). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The pid of the node process running the service under `root` (npm → sh → node), or undefined. */
function serviceUnder(root: number): number | undefined {
  const children = (pid: number): number[] => {
    try {
      return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (/(^|\/)node$/.test(argv[0]!) && argv.some((arg) => /(dist\/app\/main\.js|bin\/punctual\.mjs)$/.test(arg))) return pid;
    } catch {
      continue;
    }
    queue.push(...children(pid));
  }
  return undefined;
}

/** How each start of B0 is launched: `npm start`, the `punctual` bin, the built entry, or the bare yardstick. */
export type StartKind = 'npm start' | 'bin' | 'node dist/app/main.js' | 'bare';

const START_COMMANDS: Record<StartKind, [string, string[]]> = {
  'npm start': ['npm', ['start', '--silent']],
  bin: [process.execPath, [`${ROOT}bin/punctual.mjs`]],
  'node dist/app/main.js': [process.execPath, [`${ROOT}dist/app/main.js`]],
  bare: [process.execPath, [`${ROOT}test/bench/bare-start.mjs`]],
};

/**
 * Runs `npm start` in the repository and answers the ms from spawn to the first 200 from
 * /readyz, with the service's own pid (not npm's) for its memory; stop() ends it with SIGTERM.
 * `kind` starts it another way (B0's comparisons), timed the same.
 */
export async function npmStart(
  db: BenchDb,
  kind: StartKind = 'npm start',
): Promise<{ readyMs: number; pid: number; stop(): Promise<number | null> }> {
  const port = await freePort();
  const started = performance.now();
  const [command, args] = START_COMMANDS[kind];
  const npm = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DATABASE_URL: db.url, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const errors: string[] = [];
  createInterface({ input: npm.stderr }).on('line', (line) => errors.push(line));
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  let ended = false;
  void exited.then(() => (ended = true));
  for (;;) {
    if (ended) throw new Error(`${kind} exited: ${errors.join('\n')}`);
    const status = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) break;
    if (performance.now() - started > 120_000) throw new Error(`${kind}: not ready in 120 s`);
    await sleep(5);
  }
  const readyMs = performance.now() - started;
  const pid = kind === 'npm start' ? serviceUnder(npm.pid!) : npm.pid;
  if (pid === undefined) throw new Error('npm start: the service process was not found');
  return {
    readyMs,
    pid,
    async stop() {
      process.kill(pid, 'SIGTERM');
      return exited;
    },
  };
}

/** User + system CPU of a process so far, in ms (Linux). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/**
 * The pid of the MariaDB (or MySQL) the bench talks to, read from its pid file; undefined for a
 * server elsewhere. Not `pidof`: with a second server on this machine (a private one for the
 * counters, BENCH_MYSQL_URL) the first pid it names may be the other's.
 */
export async function databasePid(db: BenchDb): Promise<number | undefined> {
  try {
    const [[row]] = await db.pool.query<mysql.RowDataPacket[]>('SELECT @@pid_file AS file');
    const pid = Number(readFileSync(String(row?.file), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && existsSync(`/proc/${pid}/stat`) ? pid : undefined;
  } catch {
    return undefined;
  }
}
