/**
 * B1d: precision through the API, against the commit before the last round of features.
 *
 * Unlike B1c (tasks inserted straight into the table, armed by the refill; orders of one or two
 * goods among 100), here a shop's orders hold 1–3 distinct goods among 1,000, 1–3 of each, and
 * every task is created by `POST /tasks` from 64 concurrent clients before the window opens, so
 * each is armed by its create. Lateness is `orders.closed_at − tasks.run_at`, read from the
 * database. The same load runs on this tree's server and on the server built from 42407fa,
 * interleaved, several times, in the same run: the figures reported are the medians.
 *
 * The 42407fa server is built once into node_modules/.cache (from `git archive`, `npm ci`,
 * `npm run build`), or taken from BENCH_BASELINE_DIR (a built checkout of that commit).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type BenchDb, cpuMs, databasePid, median, quantile, type Server, sleep, startServer, waitUntil } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

export const BASELINE_COMMIT = '42407fa';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GOODS = 1000;
const CLIENTS = 64;
const WINDOW_MS = 10_000;

/** A built server of `commit` (by default 42407fa, or BENCH_BASELINE_DIR's): its dist/main.js. */
export function baselineMain(commit = BASELINE_COMMIT): string {
  const dir =
    (commit === BASELINE_COMMIT ? process.env.BENCH_BASELINE_DIR : undefined) ?? `${ROOT}node_modules/.cache/bench-${commit}`;
  // 42407fa's entry point was dist/main.js; later commits' is dist/app/main.js.
  const built = () => [`${dir}/dist/app/main.js`, `${dir}/dist/main.js`].find((path) => existsSync(path));
  const found = built();
  if (found !== undefined) return found;
  console.log(`  building ${commit} in ${dir} (once) …`);
  mkdirSync(dir, { recursive: true });
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive ${commit} | tar -x -C "${dir}"`], { stdio: 'inherit' });
  execFileSync('npm', ['ci', '--silent', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: dir, stdio: 'inherit' });
  const main = built();
  if (main === undefined) throw new Error(`${commit} built in ${dir}, but with no dist/app/main.js or dist/main.js`);
  return main;
}

/** A small deterministic PRNG (mulberry32), so both servers close the same orders. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Unpaid orders B1..Bn, each with 1–3 distinct goods among GOODS, 1–3 of each. */
async function seedShop(db: BenchDb, n: number): Promise<void> {
  const random = prng(22);
  for (let start = 1; start <= n; start += 5000) {
    const rows: [string, string][] = [];
    for (let seq = start; seq < Math.min(n + 1, start + 5000); seq++) {
      const goods = new Set<number>();
      const count = 1 + Math.floor(random() * 3);
      while (goods.size < count) goods.add(1 + Math.floor(random() * GOODS));
      const items = [...goods].map((goodsId) => ({ goods_id: goodsId, num: 1 + Math.floor(random() * 3) }));
      rows.push([`B${seq}`, JSON.stringify(items)]);
    }
    await db.exec('INSERT INTO orders (order_sn, items) VALUES ?', [rows]);
  }
}

/** `POST /tasks` from CLIENTS clients, the i-th body from `body(i)`, `amount` of them or for `duration` s. */
async function post(
  server: Server,
  limit: { amount: number } | { duration: number },
  body: (i: number) => unknown,
): Promise<{ created: number; seconds: number }> {
  let next = 0;
  const result = await autocannon({
    url: `${server.baseUrl}/tasks`,
    method: 'POST',
    connections: CLIENTS,
    ...limit,
    headers: { 'content-type': 'application/json' },
    requests: [{ setupRequest: (request) => ({ ...request, body: JSON.stringify(body(next++)) }) }],
  });
  return { created: result['2xx'], seconds: result.duration };
}

/**
 * How long creating `n` tasks will take here and now: 2 s of creates for a day ahead (never armed,
 * deleted after), at their rate with a margin. The machine's load sets the lead, not a guess.
 */
async function leadMs(db: BenchDb, server: Server, n: number, tasks: string): Promise<number> {
  const { created, seconds } = await post(server, { duration: 2 }, (i) => ({
    type: 'close_order',
    payload: { orderSn: `CAL${i}` },
    delayMs: 86_400_000,
  }));
  await db.exec(`DELETE FROM ${tasks} WHERE JSON_VALUE(payload, '$.orderSn') LIKE 'CAL%'`);
  return 3000 + (n / (0.6 * Math.max(1, created / seconds))) * 1000;
}

interface Figures {
  p50: number;
  p99: number;
  max: number;
  early: number;
  run: number;
  drain: number;
  stockOk: boolean;
  /** The server's CPU time (user + system) per task over the window, in µs: what the load on the machine does not change much. */
  cpuUs: number;
  /** MariaDB's CPU per task over the window (the same machine: it competes with the server), µs. */
  dbCpuUs: number;
  /** What MariaDB did per task over the window (global status counters; the whole server's). */
  dbWork: DbWork;
}

/**
 * Counters of the database's work that do not depend on the machine's load: redo bytes written,
 * index rows read, row changes, buffer pool page touches and statements. Global: anything else
 * the server runs meanwhile counts too, so compare runs of one sitting.
 */
const WORK_COUNTERS = {
  redoBytes: 'Innodb_lsn_current',
  pageTouches: 'Innodb_buffer_pool_read_requests',
  pageWrites: 'Innodb_buffer_pool_write_requests',
  indexReads: 'Handler_read_key',
  indexNexts: 'Handler_read_next',
  rowUpdates: 'Handler_update',
  rowWrites: 'Handler_write',
  statements: 'Questions',
} as const;
export type DbWork = { [name in keyof typeof WORK_COUNTERS]: number };

export async function dbCounters(db: BenchDb): Promise<DbWork> {
  const rows = await db.rows<{ Variable_name: string; Value: string }>(
    `SHOW GLOBAL STATUS WHERE Variable_name IN (${Object.values(WORK_COUNTERS)
      .map(() => '?')
      .join(', ')})`,
    Object.values(WORK_COUNTERS),
  );
  const byName = new Map(rows.map((row) => [row.Variable_name.toLowerCase(), Number(row.Value)]));
  return Object.fromEntries(
    Object.entries(WORK_COUNTERS).map(([name, variable]) => [name, byName.get(variable.toLowerCase()) ?? Number.NaN]),
  ) as DbWork;
}

function workPerTask(before: DbWork, after: DbWork, n: number): DbWork {
  return Object.fromEntries(
    Object.keys(WORK_COUNTERS).map((name) => [name, (after[name as keyof DbWork] - before[name as keyof DbWork]) / n]),
  ) as DbWork;
}

/** One run of `n` tasks over the window on the server at `main` (undefined: this tree's). */
/** Watches a run's window (from before the first task is due to the last done), e.g. with a profiler. */
export interface WindowProbe {
  nodeArgs?: string[];
  /** With the inspector (for a profiler); by default when `started` is given. */
  inspect?: boolean;
  started?(server: Server): Promise<void>;
  ended?(server: Server): Promise<void>;
}

export async function once(db: BenchDb, n: number, main: string | undefined, probe: WindowProbe = {}): Promise<Figures> {
  // The baseline's server migrates its own tables (named without punctual_); this tree's would not be its.
  await db.reset(GOODS, main === undefined);
  const tasks = main === undefined ? 'punctual_tasks' : 'tasks';
  await seedShop(db, n);
  const server = await startServer(db, { main, nodeArgs: probe.nodeArgs, inspect: probe.inspect ?? probe.started !== undefined });
  try {
    const first = Date.now() + (await leadMs(db, server, n, tasks));
    const { created } = await post(server, { amount: n }, (i) => ({
      type: 'close_order',
      payload: { orderSn: `B${i + 1}` },
      runAt: Math.round(first + (i * WINDOW_MS) / n),
    }));
    if (created !== n) throw new Error(`only ${created} of ${n} creates answered 2xx`);
    if (Date.now() >= first) throw new Error(`creating ${n} tasks outlasted the lead time`);
    await sleep(Math.max(0, first - 500 - Date.now()));
    await probe.started?.(server);
    const cpuBefore = cpuMs(server.child.pid!);
    const dbPid = await databasePid(db);
    const dbBefore = dbPid === undefined ? Number.NaN : cpuMs(dbPid);
    const workBefore = await dbCounters(db);
    // Asks for one row left to run, from the status index: a count of the done ones at each poll
    // would read more rows than the firings do, and the work counters would show the bench.
    await waitUntil(
      async () =>
        (await db.count(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${tasks} WHERE status IN ('pending', 'running') LIMIT 1) AS t`)) === 0,
      300_000,
      `B1d tasks to run`,
    );
    const cpu = cpuMs(server.child.pid!) - cpuBefore;
    const dbCpu = dbPid === undefined ? Number.NaN : cpuMs(dbPid) - dbBefore;
    const dbWork = workPerTask(workBefore, await dbCounters(db), n);
    const done = await db.count(`SELECT COUNT(*) AS n FROM ${tasks} WHERE status = 'done'`);
    if (done !== n) throw new Error(`B1d: ${done} of ${n} tasks done, the others not pending`);
    await probe.ended?.(server);
    const late = await db.closeLateness(tasks);
    const [span] = await db.rows<{ last: Date }>("SELECT MAX(closed_at) AS last FROM orders WHERE status = 'closed'");
    return {
      p50: quantile(late, 0.5),
      p99: quantile(late, 0.99),
      max: late[late.length - 1] ?? Number.NaN,
      early: late.filter((ms) => ms < 0).length,
      run: late.length,
      drain: n / ((span!.last.getTime() - first) / 1000),
      stockOk: await db.stockAddsUp(),
      cpuUs: (cpu * 1000) / n,
      dbCpuUs: (dbCpu * 1000) / n,
      dbWork,
    };
  } finally {
    await server.stop();
  }
}

/**
 * Each load on both servers, `repeats` times, alternating which goes first; records the medians
 * (and every run's p99, to show the spread).
 */
/** The database's work per firing held to 42407fa's: these counters (and MariaDB's CPU) ≤ its × 1.1. */
const HELD_TO_BASELINE: (keyof DbWork)[] = ['pageTouches', 'pageWrites', 'redoBytes'];
const WORK_RATIO = 1.1;
/**
 * Lateness p99 at 10,000/s ≤ 42407fa's × 1.2, measured in the same run. The earlier target of
 * 50 ms on the wall clock is retired with the issue that set it: on a shared 2-core machine it
 * moved with the machine (42407fa's own p99 at this load ranged from 111 to 1,714 ms in one run).
 */
const P99_RATIO = 1.2;

export async function apiPrecision(db: BenchDb, record: Record, repeats = Number(process.env.BENCH_B1D_REPEATS ?? 3)): Promise<void> {
  const baseline = baselineMain();
  const loads = [
    { n: 20_000, label: '2,000/s', p99Held: false },
    { n: 100_000, label: '10,000/s', p99Held: true },
  ];
  for (const { n, label, p99Held } of loads) {
    const runs: Partial<{ [side: string]: Figures[] }> = { current: [], [BASELINE_COMMIT]: [] };
    for (let r = 0; r < repeats; r++) {
      const order = r % 2 === 0 ? ['current', BASELINE_COMMIT] : [BASELINE_COMMIT, 'current'];
      for (const side of order) {
        const figures = await once(db, n, side === 'current' ? undefined : baseline);
        console.log(
          `  B1d ${label} ${side} run ${r + 1}: p50 ${figures.p50} ms, p99 ${figures.p99} ms, max ${figures.max} ms, drained ${Math.round(figures.drain)}/s, server CPU ${Math.round(figures.cpuUs)} µs/task, MariaDB CPU ${Math.round(figures.dbCpuUs)} µs/task; per task: ${Object.entries(
            figures.dbWork,
          )
            .map(([name, value]) => `${name} ${value.toFixed(1)}`)
            .join(', ')}`,
        );
        runs[side]!.push(figures);
      }
    }
    for (const side of ['current', BASELINE_COMMIT]) {
      const list = runs[side]!;
      const S = 'B1d';
      const at = `${label}, ${side}`;
      const p99s = list.map((f) => f.p99);
      if (side === 'current') {
        record(S, `tasks run, ${at}`, Math.min(...list.map((f) => f.run)), 'tasks', {
          text: `= ${n}`,
          ok: list.every((f) => f.run === n && f.stockOk),
        });
        record(S, `early, ${at}`, Math.max(...list.map((f) => f.early)), 'tasks', { text: '= 0', ok: list.every((f) => f.early === 0) });
      }
      record(S, `lateness p50, ${at}`, median(list.map((f) => f.p50)), 'ms');
      record(S, `lateness p99, ${at}`, median(p99s), 'ms');
      record(S, `lateness max, ${at}`, median(list.map((f) => f.max)), 'ms');
      record(S, `drain rate, ${at}`, median(list.map((f) => f.drain)), 'tasks/s');
      record(S, `server CPU per task, ${at}`, median(list.map((f) => f.cpuUs)), 'µs');
      record(S, `MariaDB CPU per task, ${at}`, median(list.map((f) => f.dbCpuUs)), 'µs');
      for (const name of Object.keys(WORK_COUNTERS) as (keyof DbWork)[]) {
        record(S, `MariaDB ${name} per task, ${at}`, median(list.map((f) => f.dbWork[name])), '');
      }
      record(S, `p99 of each run, ${at}`, Math.max(...p99s), `ms (max of ${p99s.join(', ')})`);
    }
    // This tree against 42407fa, as ratios of the medians of the same run.
    const ofSide = (side: string, figure: (f: Figures) => number) => median(runs[side]!.map(figure));
    const ratio = (figure: (f: Figures) => number) => ofSide('current', figure) / ofSide(BASELINE_COMMIT, figure);
    const vs = `${label}, ÷ ${BASELINE_COMMIT}`;
    for (const name of HELD_TO_BASELINE) {
      const r = ratio((f) => f.dbWork[name]);
      record('B1d', `MariaDB ${name} per task, ${vs}`, r, '×', { text: `≤ ${WORK_RATIO}×`, ok: r <= WORK_RATIO });
    }
    const cpu = ratio((f) => f.dbCpuUs);
    record('B1d', `MariaDB CPU per task, ${vs}`, cpu, '×', { text: `≤ ${WORK_RATIO}×`, ok: cpu <= WORK_RATIO });
    if (p99Held) {
      const late = ratio((f) => f.p99);
      record('B1d', `lateness p99, ${vs}`, late, '×', { text: `≤ ${P99_RATIO}×`, ok: late <= P99_RATIO });
    }
  }
}
