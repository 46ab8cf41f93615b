/**
 * Bodies that are cheap to send and were dear to read, against the real server (node
 * dist/app/main.js as a child process) while /healthz is probed: a batch of cron expressions
 * that never match (each check once searched from 1970 for a match that does not exist), and a
 * batch body of nothing but `[` (once parsed whole, eight million levels, before its depth was
 * refused). Each must be refused with a clear 400 while the event loop, and so every armed timer,
 * keeps running. Prints the figures; the checks leave the room a loaded 2-core machine needs.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { type ServerProcess, startServer } from '../helpers/server.js';

vi.setConfig({ testTimeout: 180_000 });

/** The batch route's body limit (BATCH_BODY_LIMIT_BYTES) and the single create's (BODY_LIMIT_BYTES). */
const BATCH_LIMIT = 16 * 1024 * 1024;
const SINGLE_LIMIT = 128 * 1024;
/** Over the idle p99, the most a /healthz probe may take under the attack (it took seconds). */
const STALL_MARGIN_MS = 250;

let db: TestDatabase;
let server: ServerProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase('costly_bodies');
});

afterEach(async () => {
  await server?.stop();
  server = undefined;
});

afterAll(async () => {
  await db?.drop();
});

async function taskCount(): Promise<number> {
  const [row] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
  return Number(row.n);
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))]!;
}

/** Probes /healthz every 10 ms until `done` settles; answers each probe's latency. */
async function probeWhile(base: string, done: Promise<unknown>): Promise<number[]> {
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => undefined);
  const latencies: number[] = [];
  while (!finished) {
    const started = performance.now();
    await (await fetch(`${base}/healthz`)).text();
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return latencies;
}

async function idleProbes(base: string): Promise<number[]> {
  return probeWhile(base, new Promise((resolve) => setTimeout(resolve, 2000)));
}

/** The server's peak resident memory so far, in MB (Linux /proc). */
function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

async function post(base: string, path: string, body: string | Buffer): Promise<{ status: number; body: any; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text), ms: performance.now() - started };
}

describe('cron expressions that never match', () => {
  it('a batch of 1,000 is refused item by item, with a clear message, and /healthz stays responsive', async () => {
    server = await startServer({ env: { DATABASE_URL: db.url } });
    const base = server.baseUrl;
    const before = await taskCount();
    // All different, so no answer can be reused: a day no month it names has, a day of the
    // month that is never the weekday occurrence it names (both must hold with "+"), and a
    // 29 February on a weekday it falls on in none of the next ten years (only a search can
    // tell: the dearest kind, so that a loop that never yields would show).
    const shapes = ['31 2,4,6,9,11 *', '1-7 * +1#2', '29 2 +1', '29 2 +3', '29 2 +4', '29 2 +6'];
    const tasks = Array.from({ length: 1000 }, (_, i) => ({
      type: 'close_order',
      payload: { orderSn: `CRON${i}` },
      cron: `${i % 60} ${Math.floor(i / 60) % 24} ${shapes[i % shapes.length]}`,
    }));

    const idle = await idleProbes(base);
    const batch = post(base, '/tasks/batch', JSON.stringify({ tasks }));
    const latencies = await probeWhile(base, batch);
    const answer = await batch;

    const idleP99 = percentile(idle, 0.99);
    const max = Math.max(...latencies);
    console.log(
      `never-matching cron batch: ${tasks.length} items, ${(JSON.stringify({ tasks }).length / 1024).toFixed(0)} KB, answered in ${answer.ms.toFixed(0)} ms; ` +
        `/healthz idle p99 ${idleP99.toFixed(1)} ms; during the batch ${latencies.length} probes, p99 ${percentile(latencies, 0.99).toFixed(1)} ms, ` +
        `max ${max.toFixed(1)} ms (over idle p99: ${(max - idleP99).toFixed(1)} ms; the target on a quiet machine is p99 < 50 ms)`,
    );
    expect(answer.status, JSON.stringify(answer.body).slice(0, 500)).toBe(200);
    const results = answer.body.results as { status: number; code: string; message: string }[];
    expect(results).toHaveLength(tasks.length);
    for (const [i, result] of results.entries()) {
      expect(result.status, tasks[i]!.cron).toBe(400);
      expect(result.message, tasks[i]!.cron).toMatch(/^body\/cron never matches/);
    }
    expect(results[0]!.message).toMatch(/day 31/);
    expect(results[0]!.message).toMatch(/February/);
    expect(results[2]!.message).toMatch(/10 years/);
    expect(answer.body.refused).toBe(tasks.length);
    expect(await taskCount()).toBe(before);
    // Before the fix the request held the event loop for 8–16 s, and /healthz with it.
    expect(max).toBeLessThanOrEqual(idleP99 + STALL_MARGIN_MS);
  });
});

describe('a body nested deeper than any route takes', () => {
  it('16 MiB of "[" is refused with a 400 at once, five at a time, without the memory to parse it', async () => {
    server = await startServer({ env: { DATABASE_URL: db.url } });
    const base = server.baseUrl;
    const pid = server.child.pid!;
    const deep = Buffer.alloc(BATCH_LIMIT, '[');

    // A warm-up, so the peak memory measured next is the parse's, not the first request's.
    expect((await post(base, '/tasks/batch', '{"tasks":[{}]}')).status).toBe(200);
    const peakBefore = peakRssMb(pid);
    const idle = await idleProbes(base);

    const one = post(base, '/tasks/batch', deep);
    const latencies = await probeWhile(base, one);
    const single = await one;
    const peakAfterOne = peakRssMb(pid);
    const five = await Promise.all(Array.from({ length: 5 }, () => post(base, '/tasks/batch', deep)));
    const peakAfterFive = peakRssMb(pid);
    const small = await post(base, '/tasks', Buffer.alloc(SINGLE_LIMIT, '['));

    const slowest = Math.max(...five.map((answer) => answer.ms));
    console.log(
      `16 MiB of "[" to POST /tasks/batch: answered ${single.status} in ${single.ms.toFixed(0)} ms (five at once: slowest ${slowest.toFixed(0)} ms); ` +
        `128 KiB to POST /tasks: ${small.status} in ${small.ms.toFixed(0)} ms; peak RSS ${peakBefore.toFixed(0)} MB before, ` +
        `${peakAfterOne.toFixed(0)} MB after one, ${peakAfterFive.toFixed(0)} MB after five more; ` +
        `/healthz idle p99 ${percentile(idle, 0.99).toFixed(1)} ms, max during the first ${Math.max(...latencies).toFixed(1)} ms (target: answer < 100 ms)`,
    );
    for (const answer of [single, ...five, small]) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
      expect(answer.body.message).toMatch(/body must not nest more than \d+ levels/);
    }
    // Before the fix: 3–5 s and +793 MB for one. Sending 16 MiB over loopback is part of the time.
    expect(single.ms).toBeLessThan(1000);
    expect(slowest).toBeLessThan(3000);
    // The route takes 16 MiB bodies, so it holds one while reading it (twice, as chunks then
    // whole); parsing eight million levels held fifty times that.
    expect(peakAfterOne - peakBefore).toBeLessThan(64);
    expect(peakAfterFive - peakBefore).toBeLessThan(5 * 48);
    expect(Math.max(...latencies)).toBeLessThanOrEqual(percentile(idle, 0.99) + STALL_MARGIN_MS);
  });

  it('a body nested to the limit still reaches the route, one level more does not; strings are not structure', async () => {
    server = await startServer({
      env: { DATABASE_URL: db.url, WEBHOOK_SECRET: 'costly-bodies-secret', WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com' },
    });
    const base = server.baseUrl;
    // {"tasks":[{"payload":{"body":[[…{}…]]}}]}: the body nests `levels` + 5 deep, the payload `levels` + 2.
    const item = (levels: number, body = `${'['.repeat(levels)}{}${']'.repeat(levels)}`) =>
      `{"type":"webhook","payload":{"url":"https://hooks.example.com/x","body":${body}},"delayMs":3600000}`;
    const tooDeep = await post(base, '/tasks', '['.repeat(200));
    const limit = Number(/more than (\d+) levels/.exec(String(tooDeep.body.message))?.[1]);
    expect(limit, JSON.stringify(tooDeep.body)).toBeGreaterThanOrEqual(3 + 31);

    // The deepest body that can be valid: a batch item whose payload nests 31 levels.
    const valid = await post(base, '/tasks/batch', `{"tasks":[${item(29)}]}`);
    expect(valid.status, JSON.stringify(valid.body)).toBe(200);
    expect(valid.body.results[0].status, JSON.stringify(valid.body)).toBe(201);
    // Exactly at the limit: the body parses, and the item is answered for its own payload.
    const atLimit = await post(base, '/tasks/batch', `{"tasks":[${item(limit - 5)}]}`);
    expect(atLimit.status, JSON.stringify(atLimit.body)).toBe(200);
    expect(atLimit.body.results[0]).toMatchObject({ status: 400, message: expect.stringMatching(/^body\/payload/) });
    const beyond = await post(base, '/tasks/batch', `{"tasks":[${item(limit - 4)}]}`);
    expect(beyond.status).toBe(400);
    expect(beyond.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(beyond.body.message).toBe(`body must not nest more than ${limit} levels of arrays and objects`);

    // Brackets and escaped quotes inside strings count for nothing, however many.
    const note = `\\"${'[{'.repeat(5000)}\\"]`;
    const quoted = await post(base, '/tasks/batch', `{"tasks":[${item(0, JSON.stringify({ note }))}]}`);
    expect(quoted.status, JSON.stringify(quoted.body)).toBe(200);
    expect(quoted.body.results[0].status, JSON.stringify(quoted.body)).toBe(201);
    const stored = (await (await fetch(`${base}/tasks/${quoted.body.results[0].id}`)).json()) as { payload: { body: { note: string } } };
    expect(stored.payload.body.note).toBe(note);
  });
});
