/**
 * BT: what tracing costs a firing. 100,000 `close_order` due over 10 s (10,000/s), inserted
 * straight into the table as B1c's are (the firing is measured, not the creates), on four
 * servers, interleaved, medians:
 * - before: the commit before tracing came in (TRACING_BEFORE), the same settings;
 * - off: this tree, no exporter, no trace context on the tasks (what a shop that does not trace
 *   runs: held to ≤ 1.05× before's server CPU per firing);
 * - context: this tree, no exporter, every task with a `trace_parent` (the context is passed on,
 *   no span is recorded);
 * - export: this tree, every task with a `trace_parent`, spans exported over OTLP/HTTP to a local
 *   receiver that reads and drops them (its queue raised so that none is dropped at this rate:
 *   OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE).
 * The server's CPU time is read from just before the first task is due to the last one done; the
 * receiver counts the spans that reached it by the server's stop.
 */
import { createServer } from 'node:http';
import { baselineMain } from './b1d-api.js';
import { type BenchDb, cpuMs, median, quantile, startServer, utcSql, waitUntil } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

/** The last commit without tracing (BENCH_BT_BEFORE: another commit to hold this tree's firings to). */
export const TRACING_BEFORE = process.env.BENCH_BT_BEFORE ?? 'e95c893';
const S = 'BT';
const N = 100_000;
/** A shop's trace context on every create (one trace: the cost does not depend on which). */
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
/** Off against before: the server's CPU per task at most this ratio. */
const OFF_RATIO = 1.05;

/** An OTLP/HTTP receiver that reads each export, counts its spans and answers 200. */
async function otlpSink(): Promise<{ url: string; spans: () => number; close(): Promise<void> }> {
  let spans = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[] };
      for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) spans += scope.spans?.length ?? 0;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface Side {
  main?: string;
  env?: { [name: string]: string };
  /** Each task's trace_parent, or none. */
  traced: boolean;
}

interface Figures {
  cpuUs: number;
  run: number;
  early: number;
  p99: number;
}

/** One run of N tasks on `side`'s server: its CPU per firing, lateness p99, tasks run. */
async function once(db: BenchDb, side: Side): Promise<Figures> {
  // The server migrates at its start: each commit its own migrations.
  await db.reset(100, false);
  await db.seedOrders(N);
  const server = await startServer(db, { main: side.main, env: side.env });
  try {
    const first = Date.now() + 3000 + N / 5;
    const trace = side.traced ? `, '${TRACEPARENT}'` : '';
    await db.exec(
      `INSERT INTO punctual_tasks (type, payload, run_at${side.traced ? ', trace_parent' : ''})
       SELECT 'close_order', JSON_OBJECT('orderSn', CONCAT('B', seq)), ${utcSql(first, `(seq - 1) * ${10_000 / N}`)}${trace}
       FROM ${db.numbers(N)}`,
    );
    if (Date.now() >= first - 500) throw new Error(`seeding ${N} tasks outlasted the lead time`);
    await new Promise((resolve) => setTimeout(resolve, first - 500 - Date.now()));
    const before = cpuMs(server.child.pid!);
    await waitUntil(
      async () => (await db.count("SELECT COUNT(*) AS n FROM (SELECT 1 FROM punctual_tasks WHERE status IN ('pending', 'running') LIMIT 1) AS t")) === 0,
      300_000,
      'BT tasks to run',
    );
    const cpu = cpuMs(server.child.pid!) - before;
    const late = await db.closeLateness();
    return { cpuUs: (cpu * 1000) / N, run: late.length, early: late.filter((ms) => ms < 0).length, p99: quantile(late, 0.99) };
  } finally {
    await server.stop();
  }
}

export async function tracingCost(db: BenchDb, record: Record, repeats = Number(process.env.BENCH_BT_REPEATS ?? 3)): Promise<void> {
  const sink = await otlpSink();
  const sides: { [side: string]: Side } = {
    before: { main: baselineMain(TRACING_BEFORE), traced: false },
    off: { traced: false },
    context: { traced: true },
    export: {
      traced: true,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_SERVICE_NAME: 'punctual-bench',
        OTEL_BSP_MAX_QUEUE_SIZE: '262144',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4096',
        OTEL_BSP_SCHEDULE_DELAY: '1000',
      },
    },
  };
  // BENCH_BT_SIDES=before,off: only those (e.g. this tree's firings against another commit's).
  const names = process.env.BENCH_BT_SIDES?.split(',') ?? Object.keys(sides);
  for (const name of names) if (!(name in sides)) throw new Error(`BENCH_BT_SIDES: unknown side ${name}; known: ${Object.keys(sides).join(', ')}`);
  const runs: { [side: string]: Figures[] } = Object.fromEntries(names.map((name) => [name, []]));
  const exported: number[] = [];
  try {
    for (let r = 0; r < repeats; r++) {
      // Each round in another order, so a slow minute of the machine falls on each side in turn.
      const order = names.map((_, i) => names[(i + r) % names.length]!);
      for (const side of order) {
        const spansBefore = sink.spans();
        // The server is stopped at the end of once(): its last spans are flushed by then.
        const figures = await once(db, sides[side]!);
        if (side === 'export') exported.push(sink.spans() - spansBefore);
        console.log(
          `  BT ${side} run ${r + 1}: server CPU ${Math.round(figures.cpuUs)} µs/task, p99 ${figures.p99} ms, ran ${figures.run}${
            side === 'export' ? `, spans exported ${exported[exported.length - 1]}` : ''
          }`,
        );
        runs[side]!.push(figures);
      }
    }
  } finally {
    await sink.close();
  }
  const cpu = (side: string) => median(runs[side]!.map((f) => f.cpuUs));
  for (const side of names) {
    record(S, `tasks run, ${side}`, Math.min(...runs[side]!.map((f) => f.run)), 'tasks', {
      text: `= ${N}`,
      ok: runs[side]!.every((f) => f.run === N && f.early === 0),
    });
    record(S, `server CPU per firing, ${side}`, cpu(side), 'µs');
    record(S, `lateness p99, ${side}`, median(runs[side]!.map((f) => f.p99)), 'ms');
  }
  const has = (side: string) => names.includes(side);
  if (has('before') && has('off')) {
    const off = cpu('off') / cpu('before');
    record(S, `server CPU per firing, off ÷ before (${TRACING_BEFORE})`, off, '×', { text: `≤ ${OFF_RATIO}×`, ok: off <= OFF_RATIO });
  }
  if (has('context') && has('off')) record(S, 'server CPU per firing, context ÷ off', cpu('context') / cpu('off'), '×');
  if (has('export') && has('off')) record(S, 'server CPU per firing, export ÷ off', cpu('export') / cpu('off'), '×');
  if (has('export')) record(S, 'spans exported per firing', median(exported) / N, 'spans');
}
