/**
 * Pull workers' requests and acks that come together are served together, against the real
 * service and MariaDB: waiting requests share one claim (each still gets its own tasks, oldest
 * first, never one task twice), acks that arrive together share one commit (each gets its own
 * answer; a stale token among them is a 409 that changes nothing), a worker type's task gets no
 * timer (created, inserted or read at boot: the dispatcher never locks it), and a waiting worker
 * hears of a due task from the hub's own timer (told by this process's writes, or set by the
 * look-ahead after a claim for a task the shop inserted itself), not from a refill cycle or the
 * peek a second later.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient, type LeasedTask } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const WORKER = 'worker-token-0123456789abcdef';
const WRITER = 'write-token-0123456789abcdef';

let db: TestDatabase;
let service: TestService;
let worker: PunctualClient;
let shop: PunctualClient;

async function metric(name: string): Promise<number> {
  const text = (await service.app.inject({ url: '/metrics', headers: { authorization: `Bearer ${WRITER}` } })).body;
  return parsePrometheus(text).get(name) ?? 0;
}

async function rows(type: string): Promise<Record<string, any>[]> {
  return db.query<any[]>('SELECT id, status, attempts, lease_owner FROM punctual_tasks WHERE type = ? ORDER BY id', [type]);
}

beforeAll(async () => {
  db = await createTestDatabase('workers_grouped');
  service = await startTestService(
    db,
    {
      PORT: '0',
      API_TOKENS_WORKER: WORKER,
      API_TOKENS_WRITE: WRITER,
      WORKER_TYPES: 'g_claim,g_other,g_ack,g_refill,g_insert,g_untimed',
      WORKER_MAX_WAITING: '40',
      // A refill far apart: a waiting worker that got its task in time did not wait for one.
      REFILL_INTERVAL_MS: '5000',
    },
    { boot: false },
  );
  const baseUrl = await service.start();
  worker = new PunctualClient({ baseUrl, token: WORKER });
  shop = new PunctualClient({ baseUrl, token: WRITER });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('waiting requests share a claim', () => {
  it('16 waiting workers of two types, 16 tasks due at once: each gets one of its type, in far fewer claims', async () => {
    const waiting = Array.from({ length: 16 }, (_, n) =>
      worker.lease({ types: [n % 2 === 0 ? 'g_claim' : 'g_other'], max: 1, leaseMs: 60_000, waitMs: 15_000 }),
    );
    await waitFor(async () => service.pullHub.waiting === 16, 10_000, 'sixteen waiting');
    const claimsBefore = await metric('punctual_pull_claims_total');
    const runAt = Date.now() + 300;
    await shop.createMany(Array.from({ length: 16 }, (_, n) => ({ type: n % 2 === 0 ? 'g_claim' : 'g_other', payload: { n }, runAt })));
    const answers = await Promise.all(waiting);
    const claims = (await metric('punctual_pull_claims_total')) - claimsBefore;

    expect(answers.map((tasks) => tasks.length)).toEqual(Array(16).fill(1));
    answers.forEach((tasks, n) => expect(tasks[0]!.type).toBe(n % 2 === 0 ? 'g_claim' : 'g_other'));
    expect(new Set(answers.flat().map((task) => task.id)).size).toBe(16);
    for (const task of answers.flat()) expect(Date.parse(task.runAt)).toBeLessThanOrEqual(Date.now());
    // One claim per waiting request would be 16; the tasks fall due in one or a few timer batches.
    expect(claims).toBeLessThanOrEqual(6);
    for (const task of answers.flat()) await worker.ack(task);
  });

  it('requests that arrive together on a backlog share claims, and never get one task twice', async () => {
    await shop.createMany(Array.from({ length: 200 }, (_, n) => ({ type: 'g_claim', payload: { n }, delayMs: 0 })));
    const claimsBefore = await metric('punctual_pull_claims_total');
    const first = await Promise.all(
      Array.from({ length: 20 }, () => worker.lease({ types: ['g_claim'], max: 10, leaseMs: 60_000, waitMs: 3000 })),
    );
    const claims = (await metric('punctual_pull_claims_total')) - claimsBefore;
    // What the dispatcher held locked for a moment (SKIP LOCKED) comes to the next requests.
    const answers = [...first];
    while (answers.flat().length < 200) {
      const more = await worker.lease({ types: ['g_claim'], max: 10, leaseMs: 60_000, waitMs: 3000 });
      expect(more.length).toBeGreaterThan(0);
      answers.push(more);
    }
    const ids = answers.flat().map((task) => task.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(200);
    // One claim per request would be 20 (and more for those that waited).
    expect(claims).toBeLessThan(15);
    const leased = (await rows('g_claim')).filter((row) => row.status === 'running');
    expect(leased.length).toBe(200);
    // Each row is leased to the token its request got, and counted one attempt.
    const tokenOf = new Map(answers.flat().map((task) => [task.id, task.leaseToken]));
    for (const row of leased) expect(row).toMatchObject({ attempts: 1, lease_owner: tokenOf.get(row.id) });
    await Promise.all(answers.flat().map((task) => worker.ack(task)));
  });
});

describe('acks that arrive together share a commit', () => {
  it('each ack gets its own answer, a stale token among them is a 409 and changes nothing', async () => {
    await shop.createMany(Array.from({ length: 41 }, (_, n) => ({ type: 'g_ack', payload: { n }, delayMs: 0 })));
    const mine = await waitFor(async () => {
      const got = await worker.lease({ types: ['g_ack'], max: 40, leaseMs: 60_000, waitMs: 2000 });
      return got.length > 0 ? got : undefined;
    }, 10_000);
    const others = await worker.lease({ types: ['g_ack'], max: 40, leaseMs: 60_000, waitMs: 5000 });
    const all = [...mine, ...others];
    expect(all.length).toBe(41);
    // One task, the stale one: its ack names another lease's token.
    const [theirs, ...rest] = all;
    const stale: LeasedTask = {
      ...theirs!,
      leaseToken: rest.find((task) => task.leaseToken !== theirs!.leaseToken)?.leaseToken ?? 'pull:forged',
    };
    const commitsBefore = await metric('punctual_pull_ack_commits_total');
    const answers = await Promise.all(
      [stale, ...rest].map((task) =>
        service.call('POST', `/tasks/${task.id}/ack`, { leaseToken: task.leaseToken }, { authorization: `Bearer ${WORKER}` }),
      ),
    );
    const commits = (await metric('punctual_pull_ack_commits_total')) - commitsBefore;

    expect(answers[0]).toMatchObject({ status: 409, body: { code: 'PUNCTUAL_NOT_YOUR_LEASE' } });
    expect(answers[0]!.body.task).toBeUndefined(); // nothing of another lease's task
    answers.slice(1).forEach((answer, i) => expect(answer).toMatchObject({ status: 200, body: { id: rest[i]!.id, status: 'done' } }));
    const after = await rows('g_ack');
    expect(after.find((row) => row.id === theirs!.id)).toMatchObject({ status: 'running', lease_owner: theirs!.leaseToken });
    expect(after.filter((row) => row.status === 'done').length).toBe(40);
    // One commit per ack would be 41.
    expect(commits).toBeLessThanOrEqual(10);
    await worker.ack(theirs!);
  });
});

describe("a worker type's task", () => {
  it('gets no timer, created, inserted by the shop or read at boot; a task of another type beside it does', async () => {
    const refills = () => metric('punctual_refill_duration_seconds_count');
    const created = (await shop.create({ type: 'g_untimed', payload: { n: 1 }, delayMs: 30_000 })).task.id;
    const contrast = (await shop.create({ type: 'close_order', payload: { orderSn: 'SN-untimed' }, delayMs: 60_000 })).task.id;
    const insert = (type: string, payload: string) =>
      db.execute(`INSERT INTO punctual_tasks (type, payload, run_at) VALUES (?, ${payload}, UTC_TIMESTAMP(3) + INTERVAL 30 SECOND)`, [type]);
    const inserted = (await insert('g_untimed', "JSON_OBJECT('n', 2)")).insertId;
    const insertedContrast = (await insert('close_order', "JSON_OBJECT('orderSn', 'SN-untimed-2')")).insertId;
    const before = await refills();
    // Two refills ended: the second began after the inserts.
    await waitFor(async () => (await refills()) >= before + 2, 20_000, 'a refill that read the inserts');
    expect([service.timers.has(contrast), service.timers.has(insertedContrast)]).toEqual([true, true]);
    expect([service.timers.has(created), service.timers.has(inserted)]).toEqual([false, false]);
    // A second process boots on the table: its boot load reads all four, arms two.
    const other = await startTestService(db, { WORKER_TYPES: 'g_untimed', REFILL_INTERVAL_MS: '5000' });
    try {
      expect([other.timers.has(contrast), other.timers.has(insertedContrast)]).toEqual([true, true]);
      expect([other.timers.has(created), other.timers.has(inserted)]).toEqual([false, false]);
    } finally {
      await other.stop();
    }
    await db.execute("UPDATE punctual_tasks SET status = 'cancelled' WHERE id IN (?)", [[contrast, insertedContrast]]);
    // Both are leased all the same once due (brought forward by the shop's own UPDATE).
    await db.execute('UPDATE punctual_tasks SET run_at = UTC_TIMESTAMP(3) WHERE id IN (?)', [[created, inserted]]);
    const got: number[] = [];
    while (got.length < 2) for (const task of await worker.lease({ types: ['g_untimed'], max: 2, waitMs: 10_000 })) got.push(task.id);
    expect(got.sort((a, b) => a - b)).toEqual([created, inserted].sort((a, b) => a - b));
  });
});

describe('a waiting worker', () => {
  it('gets a task created in this process at its runAt (the arming tells the hub), well before a refill cycle (5 s) or a table peek (1 s)', async () => {
    const lateness: number[] = [];
    for (let round = 0; round < 5; round++) {
      const leased = worker.lease({ types: ['g_refill'], waitMs: 10_000 });
      await waitFor(async () => service.pullHub.waiting === 1, 5000, 'the worker waits');
      // Created in a request, due a moment later: no timer, the arming tells the hub, which wakes
      // at runAt; the peek, a second after the worker began to wait, would come most of a second late.
      const runAt = Date.now() + 150;
      await shop.create({ type: 'g_refill', payload: { round }, runAt });
      const [task] = await leased;
      lateness.push(Date.now() - runAt);
      expect(task).toBeDefined();
      await worker.ack(task!);
    }
    lateness.sort((a, b) => a - b);
    expect(lateness[0]).toBeGreaterThanOrEqual(0);
    // The hub's own timer answers in a few ms; the peek would be about 750 ms late, a refill up to 5 s.
    expect(lateness[2]).toBeLessThan(400);
  });

  it("gets a task the shop inserted itself at its runAt, before this process's timers hold it (the look-ahead)", async () => {
    const lateness: number[] = [];
    for (let round = 0; round < 5; round++) {
      // Straight into the table, due in 400 ms: no timer here knows it until a refill (5 s apart).
      const inserted = await db.execute(
        "INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('g_insert', JSON_OBJECT('n', 1), UTC_TIMESTAMP(3) + INTERVAL 400000 MICROSECOND)",
      );
      const [row] = await db.query<any[]>('SELECT UNIX_TIMESTAMP(run_at) * 1000 AS at FROM punctual_tasks WHERE id = ?', [inserted.insertId]);
      const [task] = await worker.lease({ types: ['g_insert'], waitMs: 10_000 });
      lateness.push(Date.now() - Number(row.at));
      expect(task?.id).toBe(inserted.insertId);
      await worker.ack(task!);
    }
    lateness.sort((a, b) => a - b);
    expect(lateness[0]).toBeGreaterThanOrEqual(0);
    // The claim that found nothing looked ahead and woke at runAt; the peek, a second after the
    // worker began to wait, would be about 600 ms late.
    expect(lateness[2]).toBeLessThan(300);
  });
});
