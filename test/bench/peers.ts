/**
 * `npm run bench -- lateness`: how late a timed task starts, at the loads a shop has (1,000,
 * 2,000 and 10,000 due a second, for 5 s each), for punctual and for what a shop would otherwise
 * use, measured the same way on the same machine in the same run: BullMQ (Redis), graphile-worker
 * and pg-boss (PostgreSQL), each at its defaults. The work is the same no-op everywhere: the
 * handler notes how late it started (lateness-file.mjs) — start − due time — and returns.
 *
 * - punctual: the built server at its defaults, with a handler module (noop-handler.mjs: a
 *   `database` handler, run in the transaction that marks its task done); the tasks are inserted
 *   straight into its table, as a shop may in its own transaction, and armed by its refill.
 * - BullMQ: a Worker at its defaults (concurrency 1); jobs added with `delay`.
 * - graphile-worker: `run()` at its defaults (concurrency 1, pollInterval 2 s, LISTEN/NOTIFY);
 *   jobs added with `runAt`.
 * - pg-boss: `work()` at its defaults (batchSize 1, pollingIntervalSeconds 2); jobs inserted
 *   with `startAfter`.
 *
 * Each worker runs in a process of its own (test/bench/peer-worker.ts; punctual's is its server),
 * starts on an empty store, and gets the whole load enqueued before the first task is due. A
 * system that cannot keep up is not waited for forever: whatever has not started 15 s after the
 * last due time counts as at least that late, and what it achieved is recorded beside it. The
 * systems take turns at each load, so a machine that grows busier over the run does not always
 * weigh on the same one.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { makeWorkerUtils } from 'graphile-worker';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { type BenchDb, sleep, startServer, utcSql } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

export const S = 'lateness';
/** The loads, due a second, each for SECONDS (BENCH_LATENESS_RATES=1000,2000 and BENCH_LATENESS_SECONDS=2 for a shorter run). */
export const RATES = (process.env.BENCH_LATENESS_RATES ?? '1000,2000,10000').split(',').map(Number);
export const SECONDS = Number(process.env.BENCH_LATENESS_SECONDS ?? 5);
/** How long after the last due time a system is waited for. */
const GRACE_MS = 15_000;
export const SYSTEMS = ['punctual', 'BullMQ', 'graphile-worker', 'pg-boss'] as const;
type System = (typeof SYSTEMS)[number];
/** The unit of a figure that is a lower bound: tasks that had not started by the end count as that late. */
export const AT_LEAST = 'ms, at least';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HANDLERS = fileURLToPath(new URL('./noop-handler.mjs', import.meta.url));
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://punctual_bench:punctual_bench@127.0.0.1:5432/punctual_bench';

interface Running {
  stop(): Promise<unknown>;
}

/** The due time of task i (0-based) of a load starting at t0: integer ms, the same for every system. */
const dueOf = (t0: number, rate: number, i: number) => t0 + Math.floor((i * 1000) / rate);

/** Starts a peer's worker process and resolves once it says it works. */
async function peerWorker(peer: string, queue: string, file: string): Promise<Running> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/bench/peer-worker.ts'), peer], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', BENCH_QUEUE: queue, BENCH_LATENESS_FILE: file, BENCH_REDIS_URL: REDIS_URL, BENCH_PG_URL: PG_URL },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const errors: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => errors.push(line));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    // Read on after `ready`: a peer's own log (graphile-worker's line per job) must not fill the pipe.
    lines.on('line', (line) => {
      if (line === 'ready') resolve();
    });
    void exited.then((code) => reject(new Error(`${peer} worker exited with ${code}: ${errors.slice(-5).join('\n')}`)));
  });
  return {
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`${peer} worker stopped with ${code}: ${errors.slice(-5).join('\n')}`);
    },
  };
}

async function withPg<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Starts `system`'s worker on an empty store and enqueues `n` no-op tasks due at `rate` a second from `t0`. */
async function prepare(
  system: System,
  db: BenchDb,
  file: string,
  rate: number,
  n: number,
  leadMs: number,
): Promise<{ worker: Running; t0: number }> {
  const queue = `punctual-bench-${randomBytes(3).toString('hex')}`;
  const chunks = (fn: (from: number, to: number) => Promise<unknown>) => async () => {
    for (let from = 0; from < n; from += 1000) await fn(from, Math.min(n, from + 1000));
  };
  if (system === 'punctual') {
    await db.reset();
    const worker = await startServer(db, { env: { HANDLERS, BENCH_LATENESS_FILE: file } });
    const t0 = Date.now() + leadMs;
    const offset = `FLOOR((seq - 1) * 1000 / ${rate})`;
    await db.exec(
      `INSERT INTO punctual_tasks (type, payload, run_at)
       SELECT 'noop', JSON_OBJECT('i', seq - 1, 'due', ${t0} + ${offset}), ${utcSql(t0, offset)} FROM ${db.numbers(n)}`,
    );
    return { worker, t0 };
  }
  if (system === 'BullMQ') {
    const url = new URL(REDIS_URL);
    const jobs = new Queue(queue, { connection: { host: url.hostname, port: Number(url.port || 6379) } });
    const worker = await peerWorker('bullmq', queue, file);
    const t0 = Date.now() + leadMs;
    await chunks(async (from, to) => {
      const now = Date.now();
      await jobs.addBulk(
        Array.from({ length: to - from }, (_, k) => {
          const due = dueOf(t0, rate, from + k);
          return { name: 'noop', data: { i: from + k, due }, opts: { timestamp: now, delay: due - now } };
        }),
      );
    })();
    return {
      worker: {
        async stop() {
          await worker.stop();
          await jobs.obliterate({ force: true });
          await jobs.close();
        },
      },
      t0,
    };
  }
  if (system === 'graphile-worker') {
    await withPg((client) => client.query('DROP SCHEMA IF EXISTS graphile_worker CASCADE'));
    const worker = await peerWorker('graphile-worker', queue, file);
    const utils = await makeWorkerUtils({ connectionString: PG_URL });
    const t0 = Date.now() + leadMs;
    try {
      await chunks((from, to) =>
        utils.addJobs(
          Array.from({ length: to - from }, (_, k) => {
            const due = dueOf(t0, rate, from + k);
            return { identifier: queue, payload: { i: from + k, due }, runAt: new Date(due) };
          }),
        ),
      )();
    } finally {
      await utils.release();
    }
    return { worker, t0 };
  }
  await withPg((client) => client.query('DROP SCHEMA IF EXISTS pgboss CASCADE'));
  const worker = await peerWorker('pg-boss', queue, file);
  const boss = new PgBoss({ connectionString: PG_URL, supervise: false, schedule: false });
  await boss.start();
  const t0 = Date.now() + leadMs;
  try {
    await chunks((from, to) =>
      boss.insert(
        Array.from({ length: to - from }, (_, k) => {
          const due = dueOf(t0, rate, from + k);
          return { name: queue, data: { i: from + k, due }, startAfter: new Date(due).toISOString() as unknown as Date };
        }),
      ),
    )();
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
  return { worker, t0 };
}

/** The runs noted in `file`: task number → ms late (a run noted twice, rolled back once, counts by its first start). */
function readRuns(file: string): Map<number, number> {
  const runs = new Map<number, number>();
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return runs;
  }
  for (const line of text.split('\n')) {
    const [i, late] = line.split(' ');
    if (i === undefined || late === undefined) continue;
    if (!runs.has(Number(i))) runs.set(Number(i), Number(late));
  }
  return runs;
}

interface Measured {
  n: number;
  ran: number;
  early: number;
  /** Every task's lateness, sorted, with whether it is only a lower bound (a task not run by the end counts as late as the end made it). */
  lateness: { ms: number; notRun: boolean }[];
  /** Tasks started per second, from the first due time to the last start. */
  achieved: number;
}

async function measure(system: System, db: BenchDb, rate: number): Promise<Measured> {
  const n = rate * SECONDS;
  const dir = mkdtempSync(join(tmpdir(), 'punctual-bench-lateness-'));
  const file = join(dir, 'runs');
  writeFileSync(file, '');
  try {
    // Enough lead for the slowest enqueue (50,000 jobs): the first is due only after the last is in.
    const leadMs = 3000 + n / 5;
    const { worker, t0 } = await prepare(system, db, file, rate, n, leadMs);
    const lastDue = dueOf(t0, rate, n - 1);
    try {
      if (Date.now() >= t0) throw new Error(`${system}: enqueueing ${n} tasks outlasted the ${leadMs} ms lead`);
      const end = lastDue + GRACE_MS;
      for (;;) {
        await sleep(500);
        if (readRuns(file).size >= n || Date.now() > end) break;
      }
    } finally {
      await worker.stop();
    }
    await sleep(200); // the last lines' flush
    const runs = readRuns(file);
    const end = lastDue + GRACE_MS;
    const lateness: Measured['lateness'] = [];
    let lastStart = t0;
    for (let i = 0; i < n; i++) {
      const late = runs.get(i);
      const due = dueOf(t0, rate, i);
      if (late === undefined) lateness.push({ ms: end - due, notRun: true });
      else {
        lateness.push({ ms: late, notRun: false });
        lastStart = Math.max(lastStart, due + late);
      }
    }
    lateness.sort((a, b) => a.ms - b.ms);
    const early = [...runs.values()].filter((late) => late < 0).length;
    return { n, ran: runs.size, early, lateness, achieved: runs.size / Math.max(0.001, (lastStart - t0) / 1000) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The q-quantile of a measurement, and whether it is only a lower bound: a task not run counts as
 * late as the end made it, less than it truly is, so a quantile at or above any such figure may be
 * more; below all of them it is exact.
 */
function quantileOf(measured: Measured, q: number): { value: number; lowerBound: boolean } {
  const k = Math.min(measured.n - 1, Math.max(0, Math.ceil(q * measured.n) - 1));
  return { value: measured.lateness[k]!.ms, lowerBound: measured.lateness.slice(0, k + 1).some((entry) => entry.notRun) };
}

export async function peerLateness(db: BenchDb, record: Record): Promise<void> {
  execFileSync(join(ROOT, 'scripts/ensure-services.sh'), { stdio: 'inherit' });
  for (const [index, rate] of RATES.entries()) {
    const order = index % 2 === 0 ? [...SYSTEMS] : [...SYSTEMS].reverse();
    for (const system of order) {
      const label = `${system}, ${rate.toLocaleString('en')}/s`;
      let measured: Measured;
      try {
        measured = await measure(system, db, rate);
      } catch (error) {
        record(S, `${label}: error`, 1, (error as Error).message.slice(0, 300), { text: 'no error', ok: false });
        continue;
      }
      record(S, `${label}: tasks run`, measured.ran, `of ${measured.n}`);
      record(S, `${label}: early`, measured.early, 'tasks', { text: '= 0', ok: measured.early === 0 });
      for (const [name, q] of [
        ['p50', 0.5],
        ['p99', 0.99],
      ] as const) {
        const { value, lowerBound } = quantileOf(measured, q);
        record(S, `${label}: lateness ${name}`, value, lowerBound ? AT_LEAST : 'ms');
      }
      record(S, `${label}: achieved`, measured.achieved, 'tasks/s');
      console.log(`  ${label}: ran ${measured.ran} of ${measured.n}`);
    }
  }
}
