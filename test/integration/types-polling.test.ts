/**
 * GET /types polled hard while one type has 100,000 due tasks (paused): the intake stays
 * responsive, the due counts are read a bounded number of times (one reading shared for a few
 * seconds), and each count stops at DUE_COUNT_CAP. Before, each /types call counted every due
 * task, and 12 pollers pushed POST /tasks to a median of 400–700 ms.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { DUE_COUNT_CAP } from '../../src/contract/limits.js';
import { TypeControlStore } from '../../src/store/type-controls.js';
import { TYPE_DUE_TTL_MS } from '../../src/store/type-due.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const READ = 'read-token-0123456789abcdef';
const WRITE = 'write-token-0123456789abcdef';
const DUE = 100_000;
const POLLERS = 12;
const POLL_MS = 6000;

let db: TestDatabase;
let service: TestService;
/** Requests go over HTTP, as a client's do: each poll waits on a socket, as twelve real pollers would. */
let base: string;

async function http(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(new URL(path, base), {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

beforeAll(async () => {
  db = await createTestDatabase('types_polling');
  service = await startTestService(
    db,
    { API_TOKENS_READ: READ, API_TOKENS_WRITE: WRITE, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' },
    { boot: false },
  );
  base = await service.start();
  // The type is paused, so its due tasks wait; inserted in one statement, due an hour ago.
  await db.query('INSERT INTO punctual_type_controls (type, paused, updated_at) VALUES (?, 1, UTC_TIMESTAMP(3))', ['close_order']);
  await service.typeControls.load();
  await db.query(
    `INSERT INTO punctual_tasks (type, payload, run_at)
     SELECT 'close_order', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 HOUR FROM seq_1_to_${DUE}`,
  );
}, 120_000);

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))]!;
}

it('keeps POST /tasks responsive under 12 pollers of /types, with the due counts read a bounded number of times', async () => {
  const counted = vi.spyOn(TypeControlStore.prototype, 'countDueByType');
  const until = Date.now() + POLL_MS;
  let polls = 0;
  const pollers = Array.from({ length: POLLERS }, async () => {
    while (Date.now() < until) {
      const answer = await http('GET', '/types', READ);
      expect(answer.status).toBe(200);
      const type = answer.body.types.find((t: { type: string }) => t.type === 'close_order');
      // Capped: the answer says "DUE_COUNT_CAP or more", not a count of every row.
      expect(type.due).toBe(DUE_COUNT_CAP);
      polls++;
    }
  });
  const latencies: number[] = [];
  let n = 0;
  while (Date.now() < until) {
    const started = performance.now();
    const answer = await http('POST', '/tasks', WRITE, {
      type: 'close_order',
      payload: { orderSn: `P${n}` },
      delayMs: 3_600_000,
      key: `poll-${n++}`,
    });
    latencies.push(performance.now() - started);
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  }
  await Promise.all(pollers);
  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 0.5);
  const p99 = percentile(latencies, 0.99);
  console.log(
    `POST /tasks under ${POLLERS} /types pollers (${polls} polls, ${DUE} due): p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms; due counted ${counted.mock.calls.length} times`,
  );
  // One reading per TTL (plus the first, and one the clock's edge may add), whatever the polling.
  expect(counted.mock.calls.length).toBeLessThanOrEqual(Math.ceil(POLL_MS / TYPE_DUE_TTL_MS) + 2);
  expect(polls).toBeGreaterThan(POLLERS);
  // The review's target is a few ms (3–10 ms without pollers). The twelve pollers run in this
  // process, sharing its event loop with the server, so 1 s is the margin that holds on a loaded
  // 2-core machine; before the fix the POSTs of a separate server took seconds. The count of
  // readings above is what tells the fix apart.
  expect(p99).toBeLessThan(1000);
  counted.mockRestore();
});
