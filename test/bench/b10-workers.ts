/**
 * B10: pull workers against webhooks, on the same load in one run.
 *
 * - Precision: workers already waiting (long poll) while 1,000 tasks a second fall due for
 *   `SECONDS` s: how late after its runAt each task reaches a worker (the worker's clock when the
 *   lease answer arrives − runAt; one machine, one clock). The same load as webhook tasks to a
 *   local receiver: how late each call arrives there. Target: p99 ≤ 20 ms for the workers.
 * - Throughput: a backlog of due tasks drained by 8 workers (lease up to 100, then ack each, or
 *   ack the lease's tasks in one POST /workers/ack), tasks settled per second; the same backlog
 *   as webhooks to the receiver. Target: ≥ 5,000/s.
 * Precision is measured twice: workers that ack each task, and workers that ack a lease's tasks
 * in one request (less work for the server while it leases).
 *
 * The tasks are inserted straight into the table (as a shop may), so the intake is not measured;
 * the server runs with its defaults but WORKER_TYPES and the receiver's host.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { Agent, request } from 'undici';
import { type BenchDb, quantile, startServer, utcSql, waitUntil } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const S = 'B10';
const RATE = 1000;
const SECONDS = 5;
const BACKLOG = 10_000;
const WAITING_WORKERS = 16;
const DRAIN_WORKERS = 8;
const TYPE = 'b10_job';

/** A local webhook receiver: when each task's call arrived, by the runAt its body carries. */
async function receiver(): Promise<{ url: string; arrivals: number[]; count: () => number; close(): Promise<void> }> {
  const arrivals: number[] = [];
  let count = 0;
  const server = createServer((req: IncomingMessage, res) => {
    const at = Date.now();
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      count++;
      const runAt = Number((JSON.parse(text || '{}') as { runAt?: number }).runAt);
      if (Number.isFinite(runAt)) arrivals.push(at - runAt);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    count: () => count,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface Leased {
  id: number;
  runAt: string;
  leaseToken: string;
}

function client(baseUrl: string) {
  const agent = new Agent({ connections: 64, keepAliveTimeout: 60_000 });
  const post = async <T>(path: string, body: unknown): Promise<T> => {
    const answer = await request(`${baseUrl}${path}`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await answer.body.text();
    if (answer.statusCode >= 300) throw new Error(`${path} answered ${answer.statusCode}: ${text}`);
    return JSON.parse(text) as T;
  };
  return {
    lease: async (max: number, waitMs: number) =>
      (await post<{ tasks: Leased[] }>('/workers/lease', { types: [TYPE], max, leaseMs: 60_000, waitMs })).tasks,
    ack: (task: Leased) => post(`/tasks/${task.id}/ack`, { leaseToken: task.leaseToken }),
    ackAll: (tasks: Leased[]) => post('/workers/ack', { acks: tasks.map((task) => ({ id: task.id, leaseToken: task.leaseToken })) }),
    close: () => agent.close(),
  };
}

/** `n` tasks of `type`, due from `startMs` at RATE a second; payload from `payloadSql` (over seq and the run_at). */
async function seed(
  db: BenchDb,
  type: string,
  n: number,
  startMs: number,
  perSecond: number,
  payloadSql: (runAtMs: string) => string,
): Promise<void> {
  const runAtMs = `(${startMs} + FLOOR((seq - 1) * 1000 / ${perSecond}))`;
  await db.exec(
    `INSERT INTO punctual_tasks (type, payload, run_at) SELECT '${type}', ${payloadSql(runAtMs)}, ${utcSql(0, runAtMs)} FROM ${db.numbers(n)}`,
  );
}

export async function pullWorkers(db: BenchDb, record: Record): Promise<void> {
  await db.reset();
  const hook = await receiver();
  const server = await startServer(db, {
    env: { WORKER_TYPES: TYPE, WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_SECRET: 'b10-bench-webhook-secret-0123456789' },
  });
  const api = client(server.baseUrl);
  try {
    // ── precision: workers already waiting while tasks fall due (100/s for scale, then 1,000/s) ──
    /** Acks a lease's tasks: each in its own request, or all in one. */
    type Acking = 'each' | 'together';
    const settle = async (tasks: Leased[], acking: Acking) => {
      if (tasks.length === 0) return;
      if (acking === 'each') await Promise.all(tasks.map((task) => api.ack(task)));
      else await api.ackAll(tasks);
    };
    const precision = async (rate: number, acking: Acking): Promise<number[]> => {
      const start = Date.now() + 4000; // armed by the next refill (1 s), well before the first is due
      const count = rate * SECONDS;
      await seed(db, TYPE, count, start, rate, (runAt) => `JSON_OBJECT('runAt', ${runAt})`);
      const late: number[] = [];
      let stop = false;
      const loops = Array.from({ length: WAITING_WORKERS }, async () => {
        while (!stop) {
          const tasks = await api.lease(20, 2000);
          const at = Date.now();
          for (const task of tasks) late.push(at - Date.parse(task.runAt));
          await settle(tasks, acking);
        }
      });
      await waitUntil(async () => late.length >= count, (SECONDS + 120) * 1000, 'every task leased', 100);
      stop = true;
      await Promise.all(loops);
      return late.sort((a, b) => a - b);
    };
    const slow = await precision(RATE / 10, 'each');
    record(S, `pull at ${RATE / 10} tasks/s: after runAt, p50`, quantile(slow, 0.5), 'ms');
    record(S, `pull at ${RATE / 10} tasks/s: after runAt, p99`, quantile(slow, 0.99), 'ms');
    const total = RATE * SECONDS;
    const lateness = await precision(RATE, 'each');
    record(S, 'pull, ack each: waiting worker gets a task after runAt, p50', quantile(lateness, 0.5), 'ms');
    record(S, 'pull, ack each: … p99', quantile(lateness, 0.99), 'ms');
    record(S, 'pull, ack each: … max', lateness.at(-1) ?? Number.NaN, 'ms');
    const together = await precision(RATE, 'together');
    const p99 = quantile(together, 0.99);
    record(S, 'pull, ack a lease at once: waiting worker gets a task after runAt, p50', quantile(together, 0.5), 'ms');
    record(S, 'pull, ack a lease at once: … p99', p99, 'ms', { text: '≤ 20 ms at 1,000 tasks/s', ok: p99 <= 20 });
    record(S, 'pull, ack a lease at once: … max', together.at(-1) ?? Number.NaN, 'ms');
    const all = [...slow, ...lateness, ...together];
    record(S, 'pull: leased before runAt', all.filter((ms) => ms < 0).length, 'tasks', { text: '0', ok: all.every((ms) => ms >= 0) });

    // ── the same load as webhooks ────────────────────────────────────────────────────────────
    const hookStart = Date.now() + 4000;
    await seed(
      db,
      'webhook',
      total,
      hookStart,
      RATE,
      (runAt) => `JSON_OBJECT('url', '${hook.url}', 'body', JSON_OBJECT('runAt', ${runAt}))`,
    );
    await waitUntil(async () => hook.arrivals.length >= total, (SECONDS + 240) * 1000, 'every webhook called', 100);
    const calls = [...hook.arrivals].sort((a, b) => a - b);
    const hookP99 = quantile(calls, 0.99);
    record(S, 'webhook: call arrives after runAt, p50', quantile(calls, 0.5), 'ms');
    record(S, 'webhook: call arrives after runAt, p99', hookP99, 'ms');
    record(S, 'pull p99 / webhook p99', p99 / hookP99, 'x');

    // ── throughput: a backlog drained by 8 workers, then by webhooks ─────────────────────────
    const drain = async (acking: Acking): Promise<number> => {
      await seed(db, TYPE, BACKLOG, Date.now() - 60_000, 1_000_000, () => "JSON_OBJECT('n', 1)");
      let settled = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: DRAIN_WORKERS }, async () => {
          for (;;) {
            const tasks = await api.lease(100, 0);
            if (tasks.length === 0 && settled >= BACKLOG) return;
            await settle(tasks, acking);
            settled += tasks.length;
          }
        }),
      );
      return BACKLOG / ((performance.now() - started) / 1000);
    };
    record(S, `pull: ${DRAIN_WORKERS} workers settle (lease 100, ack each)`, await drain('each'), 'tasks/s');
    const pullRate = await drain('together');
    record(S, `pull: ${DRAIN_WORKERS} workers settle (lease 100, ack the 100 at once)`, pullRate, 'tasks/s', {
      text: '≥ 5,000 tasks/s',
      ok: pullRate >= 5000,
    });

    const before = hook.count();
    const hookDrain = performance.now();
    await seed(db, 'webhook', BACKLOG, Date.now() - 60_000, 1_000_000, () => `JSON_OBJECT('url', '${hook.url}')`);
    await waitUntil(async () => hook.count() - before >= BACKLOG, 300_000, 'every webhook of the backlog', 100);
    const hookRate = BACKLOG / ((performance.now() - hookDrain) / 1000);
    record(S, 'webhook: backlog calls', hookRate, 'tasks/s');
    record(S, 'pull / webhook throughput', pullRate / hookRate, 'x');
  } finally {
    await api.close();
    await server.stop();
    await hook.close();
  }
}
