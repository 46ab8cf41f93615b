import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'test-token-0123456789abcdef';
const auth = { authorization: `Bearer ${TOKEN}` };

let db: TestDatabase;
let service: TestService;

async function rowCount(): Promise<number> {
  const rows = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
  return Number(rows[0].n);
}

const call = (method: string, url: string, body?: unknown, headers: Record<string, string> = auth) =>
  service.call(method, url, body, headers);

/** Arrays in arrays, `levels` deep. */
function nested(levels: number): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

const closeOrder = (extra: Record<string, unknown> = {}) => ({
  type: 'close_order',
  payload: { orderSn: 'SN000001' },
  runAt: '2035-12-01T10:00:00+08:00',
  ...extra,
});

beforeAll(async () => {
  db = await createTestDatabase('api');
  service = await startTestService(db, {
    API_TOKEN: TOKEN,
    TIMEZONE: 'Asia/Shanghai',
    WEBHOOK_SECRET: 'whsec-test',
    WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com',
    // Far horizon: the tasks of these tests sit in the future, none runs.
    HORIZON_MS: String(10 * 24 * 3600 * 1000),
  });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
});

describe('POST /tasks', () => {
  it('answers 201 with the task, committed, runAt in UTC and runAtLocal in the task zone', async () => {
    const { status, body } = await call('POST', '/tasks', closeOrder({ key: 'close_order:SN000001' }));
    expect(status).toBe(201);
    expect(body).toMatchObject({
      key: 'close_order:SN000001',
      type: 'close_order',
      payload: { orderSn: 'SN000001' },
      status: 'pending',
      runAt: '2035-12-01T02:00:00.000Z',
      runAtLocal: '2035-12-01T10:00:00.000+08:00',
      timezone: 'Asia/Shanghai',
      attempts: 0,
      maxAttempts: 4,
      misfire: 'run',
      lastError: null,
      finishedAt: null,
    });
    expect(Number.isInteger(body.id)).toBe(true);
    const rows = await db.query<any[]>('SELECT run_at, timezone, status, task_key FROM punctual_tasks WHERE id = ?', [body.id]);
    expect(rows[0].run_at.toISOString()).toBe('2035-12-01T02:00:00.000Z');
    expect(rows[0]).toMatchObject({ timezone: 'Asia/Shanghai', status: 'pending', task_key: 'close_order:SN000001' });
  });

  it('reads a naive runAt in the request zone, else in TIMEZONE', async () => {
    const inRequestZone = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01 10:00:00', timezone: 'America/New_York' }));
    expect(inRequestZone.body).toMatchObject({
      runAt: '2035-12-01T15:00:00.000Z',
      runAtLocal: '2035-12-01T10:00:00.000-05:00',
      timezone: 'America/New_York',
    });
    const inServiceZone = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01 10:00:00' }));
    expect(inServiceZone.body).toMatchObject({ runAt: '2035-12-01T02:00:00.000Z', timezone: 'Asia/Shanghai' });
  });

  it('keeps the offset a runAt was written with when the request names no zone', async () => {
    // TIMEZONE here is Asia/Shanghai: a runAt at -05:00 was shown at +08:00 (a new user's finding, with UTC).
    const newYork = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01T10:00:00-05:00' }));
    expect(newYork.body).toMatchObject({
      runAt: '2035-12-01T15:00:00.000Z',
      runAtLocal: '2035-12-01T10:00:00.000-05:00',
      timezone: 'Etc/GMT+5',
    });
    // The offset TIMEZONE has at that instant: TIMEZONE itself, a zone with rules.
    const shanghai = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01T10:00:00+0800' }));
    expect(shanghai.body).toMatchObject({ runAtLocal: '2035-12-01T10:00:00.000+08:00', timezone: 'Asia/Shanghai' });
    // An offset of minutes has no IANA name; Z names no offset to keep: TIMEZONE.
    const kolkata = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01T10:00:00+05:30' }));
    expect(kolkata.body).toMatchObject({ runAt: '2035-12-01T04:30:00.000Z', timezone: 'Asia/Shanghai' });
    const utc = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01T10:00:00Z' }));
    expect(utc.body).toMatchObject({ runAtLocal: '2035-12-01T18:00:00.000+08:00', timezone: 'Asia/Shanghai' });
    // A zone the request names wins over the offset.
    const named = await call('POST', '/tasks', closeOrder({ runAt: '2035-12-01T10:00:00-05:00', timezone: 'Europe/Paris' }));
    expect(named.body).toMatchObject({ runAtLocal: '2035-12-01T16:00:00.000+01:00', timezone: 'Europe/Paris' });
    const stored = await db.query<any[]>('SELECT timezone FROM punctual_tasks WHERE id = ?', [newYork.body.id]);
    expect(stored[0].timezone).toBe('Etc/GMT+5');
  });

  it('takes epoch milliseconds and delayMs, and echoes the zone for every form', async () => {
    const epoch = await call('POST', '/tasks', closeOrder({ runAt: Date.parse('2035-12-01T02:00:00Z'), timezone: 'Europe/Paris' }));
    expect(epoch.body).toMatchObject({
      runAt: '2035-12-01T02:00:00.000Z',
      runAtLocal: '2035-12-01T03:00:00.000+01:00',
      timezone: 'Europe/Paris',
    });
    const before = Date.now();
    const delayed = await call('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'SN2' }, delayMs: 3_600_000 });
    expect(delayed.status).toBe(201);
    const runAt = Date.parse(delayed.body.runAt);
    expect(runAt).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(runAt).toBeLessThanOrEqual(Date.now() + 3_600_000);
    expect(delayed.body.timezone).toBe('Asia/Shanghai');
  });

  it('resolves DST gaps and overlaps by the documented rule', async () => {
    const gap = await call('POST', '/tasks', closeOrder({ runAt: '2026-03-08 02:30:00', timezone: 'America/New_York' }));
    expect(gap.body.runAtLocal).toBe('2026-03-08T03:30:00.000-04:00');
    const overlap = await call('POST', '/tasks', closeOrder({ runAt: '2026-11-01 01:30:00', timezone: 'America/New_York' }));
    expect(overlap.body.runAtLocal).toBe('2026-11-01T01:30:00.000-04:00');
  });

  it('accepts maxAttempts, misfire and a runAt in the past', async () => {
    const { status, body } = await call('POST', '/tasks', closeOrder({ runAt: '2001-01-01T00:00:00Z', maxAttempts: 9, misfire: 'skip' }));
    expect(status).toBe(201);
    expect(body).toMatchObject({ maxAttempts: 9, misfire: 'skip', runAt: '2001-01-01T00:00:00.000Z' });
  });

  describe('dedup by key', () => {
    it('answers 200 with the same task when the same create comes again', async () => {
      const first = await call('POST', '/tasks', closeOrder({ key: 'k-same' }));
      // The same content, with the payload's keys in another order and the instant in another form.
      const again = await call('POST', '/tasks', {
        ...closeOrder({ key: 'k-same' }),
        runAt: '2035-12-01T02:00:00Z',
        payload: { orderSn: 'SN000001' },
      });
      expect(first.status).toBe(201);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      expect(await rowCount()).toBe(1);
    });

    it('answers 200 for a retried delayMs create (same delay after the task was created)', async () => {
      const body = { type: 'close_order', payload: { orderSn: 'SN9' }, delayMs: 60_000, key: 'k-delay' };
      const first = await call('POST', '/tasks', body);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const again = await call('POST', '/tasks', body);
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(first.body.id);
    });

    it.each([
      ['payload', { payload: { orderSn: 'SN-other' } }],
      ['runAt', { runAt: '2035-12-01T10:00:01+08:00' }],
      ['type', { type: 'webhook', payload: { url: 'https://hooks.example.com/x' } }],
    ])('answers 409 with the existing task when the %s differs', async (_, change) => {
      const first = await call('POST', '/tasks', closeOrder({ key: 'k-409' }));
      const other = await call('POST', '/tasks', closeOrder({ key: 'k-409', ...change }));
      expect(other.status).toBe(409);
      expect(other.body).toMatchObject({ statusCode: 409, error: 'Conflict', task: { id: first.body.id, key: 'k-409' } });
      expect(other.body.message).toContain('k-409');
      expect(await rowCount()).toBe(1);
    });

    it('still answers 200 after the task ran or was cancelled', async () => {
      const first = await call('POST', '/tasks', closeOrder({ key: 'k-later' }));
      await call('POST', `/tasks/${first.body.id}/cancel`);
      const again = await call('POST', '/tasks', closeOrder({ key: 'k-later' }));
      expect(again.status).toBe(200);
      expect(again.body.status).toBe('cancelled');
    });

    it('makes one task of ten racing creates with one key', async () => {
      const answers = await Promise.all(Array.from({ length: 10 }, () => call('POST', '/tasks', closeOrder({ key: 'k-race' }))));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
      expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
      expect(await rowCount()).toBe(1);
    });
  });

  describe('bad input gets a 4xx naming the field, and writes nothing', () => {
    const long = 'x'.repeat(200 * 1024);
    it.each([
      ['missing type', { payload: { orderSn: 'a' }, delayMs: 0 }, 400, 'body must have required properties type'],
      ['unknown type', { type: 'launch_rocket', payload: {}, delayMs: 0 }, 400, 'body/type is not a known task type: "launch_rocket"'],
      ['type of the wrong kind', { type: 42, payload: {}, delayMs: 0 }, 400, 'body/type must be string'],
      [
        'payload missing a field',
        { type: 'close_order', payload: {}, delayMs: 0 },
        400,
        'body/payload must have required properties orderSn',
      ],
      [
        'payload field of the wrong kind',
        { type: 'close_order', payload: { orderSn: 5 }, delayMs: 0 },
        400,
        'body/payload/orderSn must be string',
      ],
      [
        'payload with an unknown field',
        { type: 'close_order', payload: { orderSn: 'a', extra: 1 }, delayMs: 0 },
        400,
        'body/payload must not have additional properties (extra)',
      ],
      ['payload not an object', { type: 'close_order', payload: ['a'], delayMs: 0 }, 400, 'body/payload must be object'],
      ['runAt not a date', closeOrder({ runAt: 'next tuesday' }), 400, 'body/runAt "next tuesday" is not an ISO-8601 date-time'],
      ['runAt impossible date', closeOrder({ runAt: '2026-02-30 10:00:00' }), 400, 'body/runAt'],
      ['runAt a boolean', closeOrder({ runAt: true }), 400, 'body/runAt must be string or integer'],
      ['runAt in epoch seconds', closeOrder({ runAt: 1_796_090_400 }), 400, 'body/runAt 1796090400 looks like epoch seconds'],
      ['runAt too far ahead', closeOrder({ runAt: '2099-01-01T00:00:00Z' }), 400, 'body/runAt must not be more than 10 years ahead'],
      ['unknown zone', closeOrder({ timezone: 'Mars/Olympus' }), 400, 'body/timezone must be an IANA time zone'],
      ['offset as zone', closeOrder({ timezone: '+08:00' }), 400, 'body/timezone must be an IANA time zone'],
      ['both runAt and delayMs', closeOrder({ delayMs: 10 }), 400, 'body/runAt and body/delayMs cannot both be given'],
      ['neither runAt nor delayMs', { type: 'close_order', payload: { orderSn: 'a' } }, 400, 'body/runAt or body/delayMs is required'],
      ['negative delayMs', { type: 'close_order', payload: { orderSn: 'a' }, delayMs: -1 }, 400, 'body/delayMs must be >= 0'],
      ['key too long', closeOrder({ key: 'k'.repeat(192) }), 400, 'body/key must not have more than 191 characters'],
      ['empty key', closeOrder({ key: '' }), 400, 'body/key'],
      ['maxAttempts zero', closeOrder({ maxAttempts: 0 }), 400, 'body/maxAttempts must be >= 1'],
      ['misfire unknown', closeOrder({ misfire: 'later' }), 400, 'body/misfire must be one of "run", "skip"'],
      ['an unknown field', closeOrder({ urgency: 1 }), 400, 'body must not have additional properties (urgency)'],
      [
        'webhook host not allowed',
        { type: 'webhook', payload: { url: 'https://evil.example.net/x' }, delayMs: 0 },
        400,
        'body/payload/url host evil.example.net is not in WEBHOOK_ALLOWED_HOSTS',
      ],
      [
        'webhook not http',
        { type: 'webhook', payload: { url: 'file:///etc/passwd' }, delayMs: 0 },
        400,
        'body/payload/url must be http or https',
      ],
      ['oversized body', closeOrder({ payload: { orderSn: long } }), 413, 'the request body is larger than the limit of 131072 bytes (128 KiB)'],
      [
        'payload nested too deep',
        { type: 'webhook', payload: { url: 'https://hooks.example.com/x', body: nested(40) }, delayMs: 0 },
        400,
        'body/payload must not nest more than 31 levels deep',
      ],
      [
        'payload with a lone surrogate',
        { type: 'webhook', payload: { url: 'https://hooks.example.com/x', body: 'a\ud800' }, delayMs: 0 },
        400,
        'body/payload must not contain a string that is not valid Unicode',
      ],
      ['key with a lone surrogate', closeOrder({ key: 'k\udc00' }), 400, 'body/key must not contain a lone surrogate'],
    ])('%s', async (_, body, status, message) => {
      const answer = await call('POST', '/tasks', body);
      expect(answer.status).toBe(status);
      expect(answer.body).toMatchObject({ statusCode: status });
      // One set of codes, whichever layer refused it (a schema's FST_ERR_VALIDATION was one before).
      expect(answer.body.code).toEqual(status === 400 ? 'PUNCTUAL_BAD_REQUEST' : expect.stringMatching(/^PUNCTUAL_/));
      expect(answer.body.error).toEqual(expect.any(String));
      expect(answer.body.message).toContain(message);
      expect(await rowCount()).toBe(0);
    });

    it('refuses a body that is not JSON', async () => {
      const broken = await call('POST', '/tasks', '{"type": "close_order",', { ...auth, 'content-type': 'application/json' });
      expect(broken.status).toBe(400);
      const xml = await service.app.inject({
        method: 'POST',
        url: '/tasks',
        headers: { ...auth, 'content-type': 'application/xml' },
        payload: '<task/>',
      });
      expect(xml.statusCode).toBe(415);
      // text/plain is what a cross-site form or "simple" fetch sends: refused before it is read.
      const text = await call('POST', '/tasks', 'hello', { ...auth, 'content-type': 'text/plain' });
      expect(text.body).toMatchObject({ statusCode: 415, message: 'a request body must be application/json, got "text/plain"' });
      expect(await rowCount()).toBe(0);
    });

    it('refuses a payload over 64 KiB that fits the body limit', async () => {
      const answer = await call('POST', '/tasks', {
        type: 'webhook',
        payload: { url: 'https://hooks.example.com/x', body: 'y'.repeat(70 * 1024) },
        delayMs: 0,
      });
      expect(answer.status).toBe(400);
      expect(answer.body.message).toBe('body/payload must not be larger than 65536 bytes as JSON');
      expect(await rowCount()).toBe(0);
    });
  });
});

describe('auth', () => {
  it('answers 401 without the token or with a wrong one, and writes nothing', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }, { authorization: TOKEN }] as Record<string, string>[]) {
      const answer = await call('POST', '/tasks', closeOrder(), headers);
      expect(answer.status).toBe(401);
      expect(answer.body).toMatchObject({ statusCode: 401, error: 'Unauthorized', code: 'PUNCTUAL_UNAUTHORIZED' });
    }
    const routes = [
      ['GET', '/tasks/pending'],
      ['GET', '/tasks/1'],
      ['POST', '/tasks/1/cancel'],
      ['POST', '/tasks/1/reschedule'],
      ['GET', '/tasks/by-key/x'],
      ['POST', '/tasks/by-key/x/cancel'],
      ['GET', '/metrics'],
    ] as const;
    for (const [method, url] of routes) {
      for (const headers of [{}, { authorization: 'Bearer nope' }, { authorization: `Basic ${TOKEN}` }] as Record<string, string>[]) {
        const answer = await call(method, url, method === 'POST' ? { delayMs: 1 } : undefined, headers);
        expect(answer.status, `${method} ${url}`).toBe(401);
      }
    }
    expect(await rowCount()).toBe(0);
  });

  it('leaves the probes open', async () => {
    expect(await call('GET', '/healthz', undefined, {})).toEqual({ status: 200, body: { status: 'ok', auth: true } });
    expect(await call('GET', '/readyz', undefined, {})).toMatchObject({ status: 200, body: { status: 'ready' } });
  });
});

describe('GET /tasks/pending', () => {
  it('pages through pending tasks by runAt then id, with a cursor', async () => {
    const created: number[] = [];
    for (let i = 0; i < 25; i++) {
      // Pairs share an instant, so the id breaks the tie.
      const runAt = Date.parse('2035-12-01T00:00:00Z') + Math.floor((24 - i) / 2) * 1000;
      created.push((await call('POST', '/tasks', closeOrder({ runAt, payload: { orderSn: `SN${i}` } }))).body.id);
    }
    const cancelled = created[3]!;
    await call('POST', `/tasks/${cancelled}/cancel`);
    const seen: { id: number; runAt: string }[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor === null ? '?limit=10' : `?limit=10&cursor=${cursor}`;
      const { status, body } = await call('GET', `/tasks/pending${query}`);
      expect(status).toBe(200);
      seen.push(...body.tasks);
      cursor = body.nextCursor;
      pages++;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(seen).toHaveLength(24);
    expect(seen.map((t) => t.id)).not.toContain(cancelled);
    const order = [...seen].sort((a, b) => a.runAt.localeCompare(b.runAt) || a.id - b.id);
    expect(seen.map((t) => t.id)).toEqual(order.map((t) => t.id));
  });

  it('filters by type and defaults to 100 a page', async () => {
    for (let i = 0; i < 3; i++)
      await call('POST', '/tasks', { type: 'webhook', payload: { url: 'https://hooks.example.com/a' }, delayMs: 60_000 });
    await call('POST', '/tasks', closeOrder());
    const { body } = await call('GET', '/tasks/pending?type=webhook');
    expect(body.tasks).toHaveLength(3);
    expect(body.nextCursor).toBeNull();
    expect(body.tasks.every((t: { type: string }) => t.type === 'webhook')).toBe(true);
  });

  it.each([
    ['limit=0', 'querystring/limit must be >= 1'],
    ['limit=1001', 'querystring/limit must be <= 1000'],
    ['limit=ten', 'querystring/limit must be integer'],
    ['cursor=bm9wZQ', 'querystring/cursor is not a nextCursor from a previous page'],
  ])('answers 400 for %s', async (query, message) => {
    const { status, body } = await call('GET', `/tasks/pending?${query}`);
    expect(status).toBe(400);
    expect(body.message).toBe(message);
  });
});

describe("the dashboard's views", () => {
  it('lists the latest finished tasks, newest first, and sums up the backlog', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call('POST', '/tasks', closeOrder({ payload: { orderSn: `R${i}` } }))).body.id);
    await call('POST', `/tasks/${ids[0]}/cancel`);
    await call('POST', `/tasks/${ids[2]}/cancel`);
    const recent = await call('GET', '/tasks/recent?status=cancelled&limit=10');
    expect(recent.body.tasks.map((task: { id: number }) => task.id)).toEqual([ids[2], ids[0]]);
    const summary = await call('GET', '/tasks/summary');
    expect(summary.status).toBe(200);
    expect(summary.body).toMatchObject({ pending: expect.any(Number), running: 0, failed: 0, armed: expect.any(Number) });
    expect(Date.parse(summary.body.countedAt)).toBeGreaterThan(0);
    expect((await call('GET', '/tasks/recent?status=pending')).status).toBe(400);
    expect((await call('GET', '/tasks/recent?limit=500')).body.message).toBe('querystring/limit must be <= 200');
    expect((await call('GET', '/tasks/summary', undefined, {})).status).toBe(401);
  });

  it('serves the dashboard page without the token', async () => {
    for (const [path, type] of [
      ['/', 'text/html'],
      ['/console/tasks/failed', 'text/html'],
      ['/console/task/42', 'text/html'],
      ['/ui/app.js', 'text/javascript'],
      ['/ui/views/tasks.js', 'text/javascript'],
      ['/ui/vendor/preact.js', 'text/javascript'],
      ['/ui/vendor/hooks.js', 'text/javascript'],
      ['/ui/vendor/htm.js', 'text/javascript'],
      ['/ui/dashboard.css', 'text/css'],
    ]) {
      const page = await service.app.inject({ url: path! });
      expect(page.statusCode, path).toBe(200);
      expect(page.headers['content-type']).toContain(type);
    }
    // The hooks import Preact by its address: a browser has no import map under this CSP.
    const hooks = await service.app.inject({ url: '/ui/vendor/hooks.js' });
    expect(hooks.body).toContain('from"/ui/vendor/preact.js"');
    expect(hooks.body).not.toMatch(/from\s*"preact"/);
  });
});

describe('one task: read, cancel, reschedule, by id and by key', () => {
  it('reads a task by id and by key, 404 when there is none, 400 for a bad id', async () => {
    const { body: task } = await call('POST', '/tasks', closeOrder({ key: 'close_order:SN/1 x' }));
    expect((await call('GET', `/tasks/${task.id}`)).body).toEqual(task);
    expect((await call('GET', `/tasks/by-key/${encodeURIComponent('close_order:SN/1 x')}`)).body).toEqual(task);
    expect((await call('GET', '/tasks/999999')).status).toBe(404);
    expect((await call('GET', '/tasks/by-key/nope')).body).toMatchObject({
      statusCode: 404,
      message: 'task with key "nope" does not exist',
    });
    expect((await call('GET', '/tasks/abc')).body).toMatchObject({ statusCode: 400, message: 'params/id must be integer' });
  });

  it('cancels a pending task and disarms its timer; a second cancel is 409', async () => {
    const { body: task } = await call('POST', '/tasks', closeOrder({ runAt: Date.now() + 60_000 }));
    expect(service.timers.has(task.id)).toBe(true);
    const cancelled = await call('POST', `/tasks/${task.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: task.id, status: 'cancelled' });
    expect(cancelled.body.finishedAt).not.toBeNull();
    expect(service.timers.has(task.id)).toBe(false);
    const again = await call('POST', `/tasks/${task.id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ statusCode: 409, task: { id: task.id, status: 'cancelled' } });
    expect((await call('POST', '/tasks/424242/cancel')).status).toBe(404);
  });

  it('cancels by key, the way a shop does when the order is paid', async () => {
    const { body: task } = await call('POST', '/tasks', closeOrder({ key: 'close_order:SN123', runAt: Date.now() + 60_000 }));
    const cancelled = await call('POST', '/tasks/by-key/close_order:SN123/cancel');
    expect(cancelled.body).toMatchObject({ id: task.id, status: 'cancelled' });
    expect(service.timers.has(task.id)).toBe(false);
    expect((await call('POST', '/tasks/by-key/close_order:SN404/cancel')).status).toBe(404);
  });

  it('reschedules a pending task, re-arming it; 409 when it is not pending', async () => {
    const { body: task } = await call('POST', '/tasks', closeOrder({ runAt: Date.now() + 60_000 }));
    const moved = await call('POST', `/tasks/${task.id}/reschedule`, { runAt: '2026-12-24 20:00:00', timezone: 'Europe/Berlin' });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({
      runAt: '2026-12-24T19:00:00.000Z',
      runAtLocal: '2026-12-24T20:00:00.000+01:00',
      timezone: 'Europe/Berlin',
    });
    // Beyond the horizon now: disarmed until the refill brings it near.
    expect(service.timers.has(task.id)).toBe(false);

    const sooner = await call('POST', `/tasks/${task.id}/reschedule`, { delayMs: 30_000 });
    expect(sooner.body.timezone).toBe('Europe/Berlin');
    expect(service.timers.runAtOf(task.id)).toBe(Date.parse(sooner.body.runAt));

    expect((await call('POST', `/tasks/${task.id}/reschedule`, { runAt: 'soon' })).status).toBe(400);
    await call('POST', `/tasks/${task.id}/cancel`);
    const refused = await call('POST', `/tasks/${task.id}/reschedule`, { delayMs: 1000 });
    expect(refused.status).toBe(409);
    expect(refused.body.task.status).toBe('cancelled');
  });

  it('finds a task by a long key in any script', async () => {
    const key = `订单:${'键'.repeat(185)}`;
    expect(key.length).toBe(188);
    const { status, body } = await call('POST', '/tasks', closeOrder({ key }));
    expect(status).toBe(201);
    expect((await call('GET', `/tasks/by-key/${encodeURIComponent(key)}`)).body.id).toBe(body.id);
  });

  it('shows a row someone inserted with a zone that is not one in UTC, instead of failing', async () => {
    const result = await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, timezone) VALUES ('close_order', '{\"orderSn\":\"x\"}', '2035-12-01 02:00:00', 'Mars/Base')",
    );
    const { status, body } = await call('GET', `/tasks/${result.insertId}`);
    expect(status).toBe(200);
    expect(body).toMatchObject({ timezone: 'Mars/Base', runAt: '2035-12-01T02:00:00.000Z', runAtLocal: '2035-12-01T02:00:00.000+00:00' });
  });

  it('arms a task beyond the horizon only when it comes near', async () => {
    const far = Date.now() + 30 * 24 * 3600 * 1000;
    const { body: task } = await call('POST', '/tasks', closeOrder({ runAt: far }));
    expect(task.status).toBe('pending');
    expect(service.timers.has(task.id)).toBe(false);
  });
});
