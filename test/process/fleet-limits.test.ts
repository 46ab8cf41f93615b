/**
 * maxConcurrency and ratePerSecond hold for the fleet: three real processes on one database, one
 * webhook type limited per task group, and a receiver that counts the calls in flight and the
 * starts, per group. Group "slow" (each call held 800 ms) is bound by its concurrency, group
 * "fast" (20 ms) by its rate. Midway one process is killed with SIGKILL while it holds run slots:
 * they stay held until its lease ends (the survivors run fewer at once meanwhile), then come back.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RowDataPacket } from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTasks, startServer, waitFor, type ServerProcess } from '../helpers/server.js';

const MAX_CONCURRENCY = 4;
const RATE = 8;
const HOLD_MS = { slow: 800, fast: 20 } as const;
const COUNT = { slow: 160, fast: 80 } as const;
const WEBHOOK_TIMEOUT_MS = 1_000;
/** A run's lease (and so its slot's): the webhook's timeout and the lease margin (run-outside.ts). */
const LEASE_MS = WEBHOOK_TIMEOUT_MS + 30_000;
/**
 * The rate is decided in database time, when a start takes a rate slot (held one second); the
 * receiver sees the call later, after COMMIT and a loopback HTTP call, and that lag varies with
 * the machine's load (the slot holder's event loop, this test's own). The slots of a window free
 * together, so a late round of calls lands next to the punctual round after it: at the receiver,
 * one second has held 12 starts under load for a rate of 8, a window of 900 ms 10, while no window
 * of 750 ms held more than 8 in any run. So the receiver counts starts in windows 250 ms shorter
 * than a second (the lag's spread it allows for): at most the rate in any of them. A limit counted per
 * process would let three times the rate through; one held half a window, twice.
 */
const LAG_SPREAD_MS = 250;

type Group = keyof typeof HOLD_MS;

interface Start {
  group: Group;
  n: number;
  at: number;
}

let db: TestDatabase;
let receiver: Server;
let port = 0;
const starts: Start[] = [];
const inFlight: Record<Group, number> = { slow: 0, fast: 0 };
/** Each change of a group's calls in flight, in time order. */
const flights: { group: Group; at: number; n: number }[] = [];

beforeAll(async () => {
  db = await createTestDatabase('fleet_limits');
  receiver = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://receiver');
    const group = url.searchParams.get('g') as Group;
    const n = Number(url.searchParams.get('n'));
    request.resume();
    starts.push({ group, n, at: Date.now() });
    flights.push({ group, at: Date.now(), n: ++inFlight[group] });
    // Ended or cut (its process killed): the call is no longer in flight, counted once.
    response.on('close', () => flights.push({ group, at: Date.now(), n: --inFlight[group] }));
    setTimeout(() => response.writableEnded || response.destroyed || response.end('ok'), HOLD_MS[group]);
  });
  receiver.listen(0, '127.0.0.1');
  await new Promise((resolve) => receiver.once('listening', resolve));
  port = (receiver.address() as AddressInfo).port;
});

afterAll(async () => {
  receiver?.close();
  await db?.drop();
});

/** The most calls of `group` in flight at once within [from, to). */
function mostInFlight(group: Group, from = 0, to = Number.POSITIVE_INFINITY): number {
  let most = 0;
  let before = 0;
  for (const change of flights) {
    if (change.group !== group) continue;
    if (change.at >= to) break;
    // What was in flight when the span began counts too.
    if (change.at < from) before = change.n;
    else most = Math.max(most, before, change.n);
  }
  return most;
}

/** The most starts of `group` in any window of `windowMs` (a second by default). */
function mostPerSecond(group: Group, windowMs = 1000): number {
  const times = starts.filter((start) => start.group === group).map((start) => start.at);
  let most = 0;
  for (let i = 0, end = 0; i < times.length; i++) {
    while (end < times.length && times[end]! < times[i]! + windowMs) end++;
    most = Math.max(most, end - i);
  }
  return most;
}

/** The run slots of the slow group held by the process `pid` (its name in holder has it): how many, and their leases' ends. */
async function liveRunSlotsOf(pid: number): Promise<{ held: number; first: number; last: number }> {
  const slow = createHash('sha256').update('slow').digest('base64url').slice(0, 22);
  const [row] = await db.query<RowDataPacket[]>(
    'SELECT COUNT(*) AS n, MIN(leased_until) AS first, MAX(leased_until) AS last FROM punctual_limit_slots ' +
      "WHERE kind = 'run' AND group_digest = ? AND holder LIKE ? AND leased_until > UTC_TIMESTAMP(3)",
    [slow, `%:${pid}:%`],
  );
  return { held: Number(row!.n), first: (row!.first as Date | null)?.getTime() ?? 0, last: (row!.last as Date | null)?.getTime() ?? 0 };
}

describe('type limits across a fleet', () => {
  it('hold for three processes together, through a kill -9 of one holding slots', async () => {
    const env = {
      DATABASE_URL: db.url,
      WEBHOOK_SECRET: 'fleet-limits-secret',
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${port}`,
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
      CONCURRENCY: '8',
      BATCH_SIZE: '20',
    };
    const servers: ServerProcess[] = await Promise.all([0, 1, 2].map(() => startServer({ env })));
    try {
      const [first] = servers;
      const limits = { maxConcurrency: MAX_CONCURRENCY, ratePerSecond: RATE, groupBy: 'group' };
      expect((await first!.request('PUT', '/types/webhook/limits', limits)).status).toBe(200);
      for (const server of servers) {
        await waitFor(
          async () =>
            ((await server.request('GET', '/types')).body.types as { type: string; maxConcurrency: number }[]).some(
              (t) => t.type === 'webhook' && t.maxConcurrency === MAX_CONCURRENCY,
            ),
          2_000,
          'every process to have the limits',
        );
      }
      const due = Date.now() + 4_000;
      const body = (group: Group, n: number) => ({
        type: 'webhook',
        group,
        runAt: due,
        payload: { url: `http://127.0.0.1:${port}/hook?g=${group}&n=${n}`, method: 'POST', body: {} },
      });
      const bodies = [
        ...Array.from({ length: COUNT.slow }, (_, n) => body('slow', n)),
        ...Array.from({ length: COUNT.fast }, (_, n) => body('fast', n)),
      ];
      const share = Math.ceil(bodies.length / servers.length);
      await Promise.all(servers.map((server, k) => createTasks(server, bodies.slice(k * share, (k + 1) * share), 8)));
      expect(Date.now()).toBeLessThan(due);

      // Three seconds' worth of the fast group's starts, and the slow group at its limit: both held.
      await waitFor(
        async () => (mostInFlight('slow') >= MAX_CONCURRENCY && starts.filter((s) => s.group === 'fast').length >= 3 * RATE) || undefined,
        15_000,
        'both groups under way',
      );
      expect(mostInFlight('slow')).toBeLessThanOrEqual(MAX_CONCURRENCY);
      expect(mostPerSecond('fast', 1000 - LAG_SPREAD_MS)).toBeLessThanOrEqual(RATE);
      // The victim: the first process seen holding run slots once the slow group is at its limit.
      await waitFor(async () => mostInFlight('slow') >= MAX_CONCURRENCY || undefined, 15_000, 'the slow group at its limit');
      const victim = await waitFor(
        async () => {
          for (const server of servers) if ((await liveRunSlotsOf(server.child.pid!)).held > 0) return server;
          return undefined;
        },
        5_000,
        'a process holding run slots',
      );
      expect(await victim.stop('SIGKILL')).toBeNull();
      const killedAt = Date.now();
      const { held, first: firstEnd, last: lastEnd } = await liveRunSlotsOf(victim.child.pid!);
      const survivors = servers.filter((server) => server !== victim);
      console.log(
        `killed a process holding ${held} run slots of the slow group, leased until ${firstEnd - killedAt}..${lastEnd - killedAt} ms after the kill`,
      );
      expect(held).toBeGreaterThan(0);

      // Its slots come back within its lease: the survivors run the slow group at its limit again.
      const full = await waitFor(
        async () => {
          const change = flights.find((c) => c.group === 'slow' && c.at > killedAt && c.n >= MAX_CONCURRENCY);
          return change?.at;
        },
        LEASE_MS + 10_000,
        'the slow group at its limit again',
      );
      console.log(`the slow group was at its limit again ${full - killedAt} ms after the kill (a run's lease: ${LEASE_MS} ms)`);
      expect(lastEnd - killedAt).toBeLessThanOrEqual(LEASE_MS);
      // Back within a poll and a claim of the last lease's end (the survivors ask every 150 ms).
      expect(full).toBeLessThan(lastEnd + 3_000);
      // Until the first lease ended, the dead process's slots were held: the survivors ran fewer at once.
      expect(mostInFlight('slow', killedAt + 500, firstEnd)).toBeLessThanOrEqual(MAX_CONCURRENCY - held);

      await waitFor(
        async () => new Set(starts.map((s) => `${s.group}:${s.n}`)).size === COUNT.slow + COUNT.fast || undefined,
        60_000,
        'every task to be called',
      );
      const slowMost = mostInFlight('slow');
      const fastRate = mostPerSecond('fast', 1000 - LAG_SPREAD_MS);
      console.log(
        `most in flight: slow ${slowMost}, fast ${mostInFlight('fast')} (limit ${MAX_CONCURRENCY}); ` +
          `most starts in ${1000 - LAG_SPREAD_MS} ms: fast ${fastRate}, slow ${mostPerSecond('slow', 1000 - LAG_SPREAD_MS)} (limit ${RATE} a second); ` +
          `in 1 s at the receiver: fast ${mostPerSecond('fast')}; calls ${starts.length}`,
      );
      expect(slowMost).toBe(MAX_CONCURRENCY);
      expect(mostInFlight('fast')).toBeLessThanOrEqual(MAX_CONCURRENCY);
      // The rate binds the fast group (its concurrency would allow far more) and holds for the fleet.
      expect(mostPerSecond('fast')).toBeGreaterThanOrEqual(RATE);
      expect(fastRate).toBeLessThanOrEqual(RATE);
      expect(mostPerSecond('slow', 1000 - LAG_SPREAD_MS)).toBeLessThanOrEqual(RATE);
      await Promise.all(survivors.map(async (server) => expect(await server.stop()).toBe(0)));
    } finally {
      await Promise.all(servers.map((server) => server.stop('SIGKILL').catch(() => null)));
    }
  }, 120_000);
});
