/**
 * One scenario, two clocks: each flow runs once on the real clock with short delays (waiting for
 * its conditions) and once on the test clock (createPunctual's `clock`) with long ones (moving
 * the clock), and the same assertions hold both ways: a retry with backoff, a cron in
 * Asia/Shanghai, a pull worker's lease that runs out, a paused type.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPunctual, defineHandler, ManualClock, type Punctual } from 'punctual';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

// On the real clock the cron scenario waits for the next whole minute: up to 60 s.
vi.setConfig({ testTimeout: 120_000 });

const anyPayload = { type: 'object', additionalProperties: true } as const;

/** Fails its first two attempts: the third one is done. */
const failsTwice = defineHandler({
  type: 'fails_twice',
  effect: 'database',
  payload: anyPayload,
  async run({ task }) {
    if (task.attempt <= 2) throw new Error(`attempt ${task.attempt} fails`);
  },
});

const tick = defineHandler({ type: 'tick', effect: 'database', payload: anyPayload, async run() {} });

/** Takes `ms` of real time (an outside call, a slow query): a move must wait for it. */
const slow = defineHandler({
  type: 'slow',
  effect: 'database',
  payload: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] } as const,
  async run({ payload }) {
    await new Promise((resolve) => setTimeout(resolve, payload.ms));
  },
});

interface World {
  name: string;
  /** A duration of the scenario: short on the real clock, long on the test clock. */
  ms(short: number, long: number): number;
  /** Lets `ms` of time pass, then `holds` is true: waited for on the real clock, at once after moving the test clock. */
  pass(ms: number, holds: () => Promise<boolean>, what: string): Promise<void>;
  /** The cron of a series every period, and the period. */
  cron: { expression: string; periodMs: number; localTime: RegExp };
  call<T = any>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function worlds(): { name: string; make: (db: TestDatabase) => Promise<{ world: World; punctual: Punctual }> }[] {
  const common = (db: TestDatabase) => ({
    DATABASE_URL: db.url,
    PORT: 0,
    LOG_LEVEL: 'warn',
    WORKER_TYPES: 'pick',
    handlers: [failsTwice, tick],
  });
  const caller = (punctual: Punctual) => async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${punctual.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
  };
  return [
    {
      name: 'the real clock, short delays',
      async make(db) {
        const punctual = createPunctual({ ...common(db), RETRY_BASE_MS: 200, RETRY_MAX_MS: 1000 });
        await punctual.start();
        const world: World = {
          name: 'real',
          ms: (short) => short,
          pass: async (ms, holds, what) => void (await waitFor(holds, ms * 3 + 10_000, what)),
          cron: { expression: '* * * * *', periodMs: MINUTE, localTime: /T\d{2}:\d{2}:00\.000\+08:00$/ },
          call: caller(punctual),
        };
        return { world, punctual };
      },
    },
    {
      name: 'the test clock, long delays',
      async make(db) {
        const punctual = createPunctual({ ...common(db), RETRY_BASE_MS: 10 * MINUTE, RETRY_MAX_MS: HOUR, clock: new ManualClock() });
        await punctual.start();
        const world: World = {
          name: 'test',
          ms: (_short, long) => long,
          pass: async (ms, holds, what) => {
            const moved = await punctual.advance(ms);
            expect(moved.settled, what).toBe(true);
            expect(await holds(), what).toBe(true);
          },
          cron: { expression: '0 10 * * *', periodMs: DAY, localTime: /T10:00:00\.000\+08:00$/ },
          call: caller(punctual),
        };
        return { world, punctual };
      },
    },
  ];
}

describe.each(worlds())('on $name', ({ make }) => {
  let db: TestDatabase;
  let punctual: Punctual;
  let world: World;
  const task = async (id: number) => (await world.call('GET', `/tasks/${id}`)).body;

  beforeAll(async () => {
    db = await createTestDatabase('clock_scenarios');
    ({ world, punctual } = await make(db));
  });
  afterAll(async () => {
    await punctual?.stop();
    await db?.drop();
  });

  it('a retry with backoff: two failures, each retried after its backoff, then done', async () => {
    const base = world.ms(200, 10 * MINUTE);
    const created = await world.call('POST', '/tasks', { type: 'fails_twice', payload: {}, delayMs: 0 });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await world.pass(0, async () => (await task(id)).attempts === 1, 'the first attempt');
    const first = await task(id);
    expect(first.status).toBe('pending');
    expect(first.lastError).toMatch(/attempt 1 fails/);
    // The retry waits its backoff (base, up to 10% more), from the failure on.
    const wait = Date.parse(first.runAt) - Date.parse(first.updatedAt);
    expect(wait).toBeGreaterThanOrEqual(base - 1);
    expect(wait).toBeLessThanOrEqual(base * 1.1 + 1);
    // One window holds both backoffs (base, then twice it): the second retry runs inside it too.
    await world.pass(base * 3.5, async () => (await task(id)).status === 'done', 'done after two retries');
    const done = await task(id);
    expect(done.attempts).toBe(3);
    expect(Date.parse(done.finishedAt)).toBeGreaterThanOrEqual(Date.parse(done.runAt));
  });

  it('a cron series in Asia/Shanghai: each occurrence at its local time, never early, the next one period on', async () => {
    const created = await world.call('POST', '/tasks', {
      type: 'tick',
      payload: {},
      cron: world.cron.expression,
      timezone: 'Asia/Shanghai',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.runAtLocal).toMatch(world.cron.localTime);
    const first = created.body.id;
    const firstAt = Date.parse(created.body.runAt);
    const series = async () =>
      (await world.call('GET', `/tasks/pending?type=tick&limit=10`)).body.tasks.filter((t: any) => t.id !== first) as any[];
    await world.pass(
      world.cron.periodMs,
      async () => (await task(first)).status === 'done' && (await series()).length === 1,
      'the first occurrence done and the next one pending',
    );
    const ran = await task(first);
    expect(Date.parse(ran.finishedAt)).toBeGreaterThanOrEqual(firstAt);
    const [next] = await series();
    expect(next.runAtLocal).toMatch(world.cron.localTime);
    expect(Date.parse(next.runAt) - firstAt).toBe(world.cron.periodMs);
    expect(next.timezone).toBe('Asia/Shanghai');
  });

  it("a pull worker's lease that runs out: the task is leased again, its attempt counted", async () => {
    const leaseMs = world.ms(1000, 10 * MINUTE);
    const created = await world.call('POST', '/tasks', { type: 'pick', payload: { sku: 'A1' }, delayMs: 0 });
    const id = created.body.id;
    const lease = async () =>
      (await world.call('POST', '/workers/lease', { types: ['pick'], max: 1, leaseMs, waitMs: 0 })).body.tasks as any[];
    let got: any[] = [];
    await world.pass(0, async () => (got = await lease()).length === 1, 'the first lease');
    expect(got[0].id).toBe(id);
    expect(await lease()).toEqual([]); // held by the first lease
    await world.pass(leaseMs + 1, async () => (got = await lease()).length === 1, 'leased again once the lease ran out');
    expect(got[0].id).toBe(id);
    expect(got[0].attempt).toBe(2);
    const acked = await world.call('POST', `/tasks/${id}/ack`, { leaseToken: got[0].leaseToken });
    expect(acked.status, JSON.stringify(acked.body)).toBeLessThan(300);
  });

  it('a paused type: its due task waits, pending, until the type is resumed', async () => {
    const delay = world.ms(300, 2 * HOUR);
    expect((await world.call('POST', '/types/tick/pause')).status).toBe(200);
    const created = await world.call('POST', '/tasks', { type: 'tick', payload: {}, delayMs: delay });
    const id = created.body.id;
    await world.pass(
      delay * 2,
      async () => (await world.call('GET', '/types')).body.types.find((t: any) => t.type === 'tick')?.waiting >= 1,
      'the due task held by the pause',
    );
    expect((await task(id)).status).toBe('pending');
    expect((await task(id)).attempts).toBe(0);
    expect((await world.call('POST', '/types/tick/resume')).status).toBe(200);
    await world.pass(world.ms(0, MINUTE), async () => (await task(id)).status === 'done', 'run once resumed');
  });
});

describe('a move of the test clock', () => {
  let db: TestDatabase;
  let punctual: Punctual;

  beforeAll(async () => {
    db = await createTestDatabase('clock_moves');
    punctual = createPunctual({
      DATABASE_URL: db.url,
      PORT: 0,
      LOG_LEVEL: 'warn',
      WORKER_TYPES: 'restock',
      handlers: [slow, tick],
      clock: new ManualClock(),
    });
    await punctual.start();
  });
  afterAll(async () => {
    await punctual?.stop();
    await db?.drop();
  });

  const create = async (ms: number, delayMs: number): Promise<number> => {
    const response = await fetch(`${punctual.url}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'slow', payload: { ms }, delayMs }),
    });
    return ((await response.json()) as { id: number }).id;
  };
  const status = async (id: number) => ((await (await fetch(`${punctual.url}/tasks/${id}`)).json()) as { status: string }).status;

  it('answers once what fell due has finished, however long its handler takes', async () => {
    const id = await create(400, HOUR);
    const moved = await punctual.advance(HOUR);
    expect(moved).toMatchObject({ settled: true, running: [] });
    expect(await status(id)).toBe('done');
  });

  it('names what still runs when its wait runs out, and the clock is where it was asked to go', async () => {
    const id = await create(3000, MINUTE);
    const before = punctual.now();
    const moved = await punctual.advance(2 * MINUTE, { waitMs: 100 });
    expect(moved.settled).toBe(false);
    expect(moved.running).toEqual([id]);
    expect(moved.now).toBe(before + 2 * MINUTE);
    await waitFor(async () => (await status(id)) === 'done', 10_000, 'the slow run to end');
  });

  it('runs a daily 10:00 Asia/Shanghai series once a day across three days, in one move', async () => {
    const response = await fetch(`${punctual.url}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'tick', payload: {}, cron: '0 10 * * *', timezone: 'Asia/Shanghai', key: 'daily-10' }),
    });
    const first = (await response.json()) as { id: number };
    const moved = await punctual.advance(3 * DAY);
    expect(moved.settled).toBe(true);
    type Listed = { runAt: string; runAtLocal: string; finishedAt: string | null };
    const list = async (status: string): Promise<Listed[]> => {
      const page = await fetch(`${punctual.url}/tasks?status=${status}&type=tick&series=${first.id}&limit=10`);
      return ((await page.json()) as { tasks: Listed[] }).tasks;
    };
    const [pending, done] = [await list('pending'), await list('done')];
    expect(done).toHaveLength(3);
    expect(pending).toHaveLength(1);
    for (const task of [...done, ...pending]) expect(task.runAtLocal).toMatch(/T10:00:00\.000\+08:00$/);
    for (const task of done) expect(Date.parse(task.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(task.runAt));
    const times = [...done, ...pending].map((task) => Date.parse(task.runAt)).sort((a, b) => a - b);
    expect(times.slice(1).map((time, i) => time - times[i]!)).toEqual([DAY, DAY, DAY]);
  });

  it('a type limited to one run at a time: the move answers once every due task of it has run, one after another', async () => {
    const limited = await fetch(`${punctual.url}/types/slow/limits`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ maxConcurrency: 1 }),
    });
    expect(limited.status).toBe(200);
    const ids = [await create(150, 10 * MINUTE), await create(150, 10 * MINUTE), await create(150, 10 * MINUTE)];
    const moved = await punctual.advance(10 * MINUTE);
    expect(moved).toMatchObject({ settled: true, running: [], held: 0 });
    for (const id of ids) expect(await status(id)).toBe('done');
  });

  it("wakes a pull worker's waiting lease request when the move makes its task due", async () => {
    const lease = fetch(`${punctual.url}/workers/lease`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ types: ['restock'], leaseMs: MINUTE, waitMs: 20_000 }),
    }).then(async (response) => ({ at: performance.now(), tasks: ((await response.json()) as { tasks: { id: number }[] }).tasks }));
    const created = await fetch(`${punctual.url}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'restock', payload: { sku: 'B2' }, delayMs: HOUR }),
    });
    const { id } = (await created.json()) as { id: number };
    const moved = performance.now();
    await punctual.advance(HOUR);
    const answer = await lease;
    expect(answer.tasks.map((task) => task.id)).toEqual([id]);
    // Woken by the move (tens of ms), not by the hub's next look a second later, nor at the end of its wait.
    expect(answer.at - moved).toBeLessThan(500);
  });

  it('refuses a move back, and moves nothing', async () => {
    const now = punctual.now();
    await expect(punctual.setTime(now - 1)).rejects.toThrow(/only moves forward/);
    await expect(punctual.advance(-5)).rejects.toThrow(/whole number/);
    expect(punctual.now()).toBe(now);
  });
});
