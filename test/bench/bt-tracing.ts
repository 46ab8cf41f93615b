/**
 * BT: what tracing costs a firing. B1d's load at 10,000/s (100,000 `close_order` created by
 * `POST /tasks`, due over 10 s), on four servers, interleaved, medians:
 * - before: the commit before tracing came in (TRACING_BEFORE), the same settings;
 * - off: this tree, no exporter, no trace context on the creates (what a shop that does not
 *   trace runs: held to ≤ 1.05× before's server CPU per task);
 * - context: this tree, no exporter, every create with a `traceparent` (the context is kept and
 *   passed on, no span is recorded);
 * - export: this tree, every create with a `traceparent`, spans exported over OTLP/HTTP to a
 *   local receiver that reads and drops them (its queue raised so that none is dropped at this
 *   rate: OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE).
 * The server's CPU time is read over the firing window only (from just before the first task
 * is due to the last done), so the creates' spans do not count in it; the receiver counts the
 * spans that reached it over the whole run.
 */
import { createServer } from 'node:http';
import { baselineMain, type Figures, once, type RunVariant } from './b1d-api.js';
import { type BenchDb, median } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

/** The last commit without tracing (BENCH_BT_BEFORE: another commit to hold this tree's firings to). */
export const TRACING_BEFORE = process.env.BENCH_BT_BEFORE ?? 'a4bf0bc';
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

export async function tracingCost(db: BenchDb, record: Record, repeats = Number(process.env.BENCH_BT_REPEATS ?? 3)): Promise<void> {
  const before = baselineMain(TRACING_BEFORE);
  const sink = await otlpSink();
  const traced = { traceparent: TRACEPARENT };
  const sides: { [side: string]: { main?: string; variant: RunVariant } } = {
    before: { main: before, variant: { tasks: 'punctual_tasks' } },
    off: { variant: {} },
    context: { variant: { headers: traced } },
    export: {
      variant: {
        headers: traced,
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
          OTEL_SERVICE_NAME: 'punctual-bench',
          OTEL_BSP_MAX_QUEUE_SIZE: '262144',
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4096',
          OTEL_BSP_SCHEDULE_DELAY: '1000',
        },
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
        const { main, variant } = sides[side]!;
        const spansBefore = sink.spans();
        // The server is stopped at the end of once(): its last spans are flushed by then.
        const figures = await once(db, N, main, {}, variant);
        if (side === 'export') exported.push(sink.spans() - spansBefore);
        console.log(
          `  BT ${side} run ${r + 1}: server CPU ${Math.round(figures.cpuUs)} µs/task, p50 ${figures.p50} ms, p99 ${figures.p99} ms, ran ${figures.run}${
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
  if (has('export')) record(S, 'spans exported per task (create + run)', median(exported) / N, 'spans');
}
