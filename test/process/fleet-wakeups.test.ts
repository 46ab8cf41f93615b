/**
 * Flow control across a fleet, driven as a shop drives it (everything through the HTTP API of
 * three processes with SHARDING=on on one database), with the two findings it was filed for:
 *
 * - held tasks are never stranded: a type paused through A, its tasks created through B and C
 *   while paused (each call held by a slow receiver), then limited and resumed through A: every
 *   task is delivered, once, none while paused, never more than the limit at once;
 * - a task created through a process that does not own its shard runs on time: 150 webhook tasks,
 *   each created 400 ms before its runAt through A, B and C in turn, 40 ms apart.
 *
 * The receiver counts calls by the task's number (an effect per run, not a state).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTask, startServer, waitFor, type ServerProcess } from '../helpers/server.js';

let db: TestDatabase;
let receiver: Server;
let port = 0;
let holdMs = 400;
/** Each call: the task number, when it arrived, and how many calls were in flight then. */
let calls: { n: number; at: number; inFlight: number }[] = [];
let inFlight = 0;
let mostInFlight = 0;
let servers: ServerProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('fleet_wakeups');
  receiver = createServer((request, response) => {
    const n = Number(new URL(request.url ?? '/', 'http://receiver').searchParams.get('n'));
    request.resume();
    inFlight++;
    mostInFlight = Math.max(mostInFlight, inFlight);
    calls.push({ n, at: Date.now(), inFlight });
    response.on('close', () => inFlight--);
    setTimeout(() => response.writableEnded || response.destroyed || response.end('ok'), holdMs);
  });
  receiver.listen(0, '127.0.0.1');
  await new Promise((resolve) => receiver.once('listening', resolve));
  port = (receiver.address() as AddressInfo).port;
});

afterEach(async () => {
  await Promise.all(servers.map((server) => server.stop('SIGKILL')));
  servers = [];
});

afterAll(async () => {
  receiver?.close();
  await db?.drop();
});

/** Three processes; `balanced`: once they share the shards out (else at once, as a deploy goes on). */
async function startFleet(balanced: boolean): Promise<ServerProcess[]> {
  await db.query('DELETE FROM punctual_tasks');
  await db.query('DELETE FROM punctual_type_controls');
  await db.query('DELETE FROM punctual_limit_slots');
  calls = [];
  mostInFlight = 0;
  const env = {
    DATABASE_URL: db.url,
    SHARDING: 'on',
    WEBHOOK_SECRET: 'fleet-wakeups-secret',
    WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${port}`,
    WEBHOOK_TIMEOUT_MS: '5000',
  };
  servers = [];
  for (let i = 0; i < 3; i++) servers.push(await startServer({ env }));
  // Every shard owned before the test begins: a create lands in a shard some process holds.
  if (balanced)
    await waitFor(
      async () => {
        const [row] = await db.query<any[]>(
          'SELECT COUNT(*) AS n, COUNT(DISTINCT owner) AS owners FROM punctual_shard_leases WHERE lease_until > UTC_TIMESTAMP(3)',
        );
        return Number(row.n) === 256 && Number(row.owners) === 3;
      },
      20_000,
      'the three processes to share the 256 shards',
    );
  return servers;
}

const webhook = (n: number, runAt: number) => ({
  type: 'webhook',
  runAt,
  payload: { url: `http://127.0.0.1:${port}/hook?n=${n}`, method: 'POST', body: { n } },
});

const delivered = () => new Set(calls.map((call) => call.n));

describe('flow control across three processes', () => {
  it('delivers every task held by a pause made through another process, once, within the limit set before the resume', async () => {
    holdMs = 400;
    const [a, b, c] = await startFleet(true);
    expect((await a!.request('POST', '/types/webhook/pause')).status).toBe(200);
    const pausedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const COUNT = 30;
    const now = Date.now();
    for (let n = 0; n < COUNT; n++) {
      const answer = await createTask(n % 2 === 0 ? b! : c!, webhook(n, now));
      expect(answer.status).toBe(201);
    }
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(calls).toHaveLength(0); // the pause held
    expect((await a!.request('PUT', '/types/webhook/limits', { maxConcurrency: 2 })).status).toBe(200);
    const resumed = await a!.request('POST', '/types/webhook/resume');
    expect(resumed.status).toBe(200);
    const resumedAt = Date.now();
    // 30 calls of 400 ms, two at a time: 6 s at the limit; every one of them well within 30 s.
    await waitFor(async () => delivered().size === COUNT, 30_000, 'every held task to be delivered').catch(async (error) => {
      const rows = await db.query<any[]>(
        "SELECT id, id MOD 256 AS shard, status, attempts, lease_owner FROM punctual_tasks WHERE status = 'pending'",
      );
      const states = await Promise.all(
        servers.map(async (server) =>
          ((await server.request('GET', '/types')).body.types as { type: string }[]).find((t) => t.type === 'webhook'),
        ),
      );
      const slots = await db.query<any[]>('SELECT * FROM punctual_limit_slots');
      throw new Error(
        `${(error as Error).message}: ${COUNT - delivered().size} stranded, pending rows ${JSON.stringify(rows)}, ` +
          `the processes' webhook type ${JSON.stringify(states)}, slots ${JSON.stringify(slots)}`,
      );
    });
    expect(calls).toHaveLength(COUNT); // once each
    // No held task waited for a wake-up that never came: two at a time, 400 ms each, the calls
    // follow each other closely; a lost wake-up shows as a gap until the sweep (1 s) or for ever.
    const arrivals = calls.map((call) => call.at).sort((x, y) => x - y);
    const gaps = arrivals.slice(1).map((at, i) => at - arrivals[i]!);
    console.log(`held tasks after the resume: first call ${arrivals[0]! - resumedAt} ms after it, longest gap ${Math.max(...gaps)} ms`);
    expect(Math.max(...gaps)).toBeLessThan(2_000);
    expect(Math.min(...calls.map((call) => call.at))).toBeGreaterThanOrEqual(resumedAt - 1_000);
    expect(pausedAt).toBeLessThan(resumedAt);
    expect(mostInFlight).toBeLessThanOrEqual(2);
    await waitFor(
      async () => Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'"))[0].n) === COUNT,
      5_000,
      'every task done',
    );
  }, 90_000);

  it('runs webhook tasks created 400 ms ahead through any process on time, while the shards are shared out', async () => {
    holdMs = 5;
    // Right after the three are ready, while the shards still move from the first to the others:
    // a shard given up after a create through its old owner armed the task is the case that ran
    // late (by up to the new owner's round, 1.7 s) before the old owner kept such tasks.
    const fleet = await startFleet(false);
    const COUNT = 150;
    const runAts = new Map<number, number>();
    for (let n = 0; n < COUNT; n++) {
      const runAt = Date.now() + 400;
      runAts.set(n, runAt);
      const answer = await createTask(fleet[n % fleet.length]!, webhook(n, runAt));
      expect(answer.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
    await waitFor(async () => delivered().size === COUNT, 20_000, 'every task to be delivered');
    expect(calls).toHaveLength(COUNT);
    // Lateness at the receiver: its arrival less its runAt (a loopback call's own time included).
    const lateness = calls.map((call) => call.at - runAts.get(call.n)!).sort((x, y) => x - y);
    const p = (q: number) => lateness[Math.min(lateness.length - 1, Math.floor(q * lateness.length))]!;
    const latest = calls
      .map((call) => ({ n: call.n, ms: call.at - runAts.get(call.n)! }))
      .sort((x, y) => y.ms - x.ms)
      .slice(0, 5);
    console.log(
      `webhook creates through any process: lateness p50 ${p(0.5)} ms, p99 ${p(0.99)} ms, max ${lateness.at(-1)} ms; ` +
        `the latest (task number: ms): ${latest.map(({ n, ms }) => `${n}: ${ms}`).join(', ')}`,
    );
    expect(lateness[0]).toBeGreaterThanOrEqual(0); // never early
    // A task left to a shard's new owner waited for its round: the latest ran 400-809 ms late
    // before the fix (524 ms with it taken out again), 22-98 ms after on a quiet machine and at
    // most 153 ms beside other test runs. The bound sits between, at twice the loaded figure; the
    // tight one (p99 <= 50 ms) is a figure to measure, not to assert.
    expect(lateness.at(-1)).toBeLessThan(350);
  }, 90_000);
});
