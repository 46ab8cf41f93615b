/**
 * Property-based fuzzing of the API with fast-check: random and mutated bodies, types, encodings,
 * huge numbers, deep nesting, long strings, SQL-looking strings, bad zones, dates out of range.
 * Every answer is below 500, a 4xx carries a message, only a 201 writes a row, and the service
 * stays up. The number of cases run is printed.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'fuzz-token-0123456789abcdef';
const auth = { authorization: `Bearer ${TOKEN}` };
const RUNS = Number(process.env.FUZZ_RUNS ?? 400);

let db: TestDatabase;
let service: TestService;
let created = 0;
let cases = 0;

beforeAll(async () => {
  db = await createTestDatabase('fuzz');
  service = await startTestService(db, {
    API_TOKEN: TOKEN,
    WEBHOOK_SECRET: 'whsec-fuzz',
    WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com',
    HORIZON_MS: '60000',
    LOG_LEVEL: 'warn',
  });
});

afterAll(async () => {
  console.log(`fuzz: ${cases} requests sent, ${created} of them valid by chance (201)`);
  await service?.stop();
  await db?.drop();
});

const nasty = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.string({ unit: 'binary', maxLength: 100 }),
  fc.constantFrom(
    "'; DROP TABLE punctual_tasks; --",
    '" OR 1=1 --',
    '1; SELECT SLEEP(10)',
    '\u0000',
    '\uD800',
    '../../etc/passwd',
    '%00',
    'x'.repeat(70_000),
    '2026-12-01T10:00:00+25:00',
    '9999-12-31T23:59:59Z',
    '0000-01-01T00:00:00Z',
    '+275760-09-13T00:00:00Z',
    '2026-12-01 10:00:00',
    'Mars/Olympus',
    'Asia/Shanghai',
    '+08:00',
    'UTC',
    'close_order',
    'webhook',
    'http://169.254.169.254/latest/meta-data',
    'https://hooks.example.com/x',
  ),
  fc.integer(),
  fc.double(),
  fc.bigInt().map((n) => Number(n)),
  fc.constantFrom(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, -1, 0, 1e308, 2 ** 31, 2 ** 53, 1_796_090_400, 1_796_090_400_000),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 4 }),
);

/**
 * Nested arrays and objects, deeper than anything should accept. Kept as a marker the body's
 * text is built around, so neither fast-check nor the test walks them recursively.
 */
const DEEP = '\u0000deep:';
const deep = fc.integer({ min: 20, max: 50_000 }).map((depth) => `${DEEP}${depth}`);

/** The body's JSON text, with every deep marker expanded in place. */
function text(body: unknown): string {
  return JSON.stringify(body).replace(/"\\u0000deep:(\d+)"/g, (_, depth: string) => {
    const levels = Number(depth);
    let open = '';
    let close = '';
    for (let i = 0; i < levels; i++) {
      open += i % 2 === 0 ? '[' : '{"a":';
      close = (i % 2 === 0 ? ']' : '}') + close;
    }
    return `${open}"bottom"${close}`;
  });
}

const field = fc.constantFrom(
  'type',
  'payload',
  'runAt',
  'delayMs',
  'timezone',
  'key',
  'maxAttempts',
  'misfire',
  'extra',
  'payload.orderSn',
  'payload.url',
  'payload.method',
  'payload.headers',
  'payload.body',
);

/** A valid create, then some fields replaced, dropped or added. */
const mutated = fc
  .tuple(
    fc.constantFrom<Record<string, unknown>>(
      { type: 'close_order', payload: { orderSn: 'SN1' }, delayMs: 60_000 },
      { type: 'close_order', payload: { orderSn: 'SN1' }, runAt: '2026-12-01 10:00:00', timezone: 'Asia/Shanghai', key: 'k' },
      { type: 'webhook', payload: { url: 'https://hooks.example.com/x', body: { a: 1 } }, runAt: Date.now() + 60_000 },
    ),
    fc.array(fc.tuple(field, fc.oneof(nasty, deep, fc.constant(undefined))), { maxLength: 4 }),
  )
  .map(([base, changes]) => {
    const body: Record<string, unknown> = structuredClone(base);
    for (const [path, value] of changes) {
      const [name, inner] = path.split('.') as [string, string | undefined];
      let target = body;
      if (inner !== undefined) {
        if (typeof body[name] !== 'object' || body[name] === null) body[name] = {};
        target = body[name] as Record<string, unknown>;
      }
      const key = inner ?? name;
      if (value === undefined) delete target[key];
      else target[key] = value;
    }
    return body;
  });

/** A valid webhook create with one field of its payload replaced: the handler's own checks. */
const webhookField = fc
  .tuple(fc.constantFrom('url', 'method', 'headers', 'body'), fc.oneof(nasty, deep, fc.dictionary(fc.string({ maxLength: 70 }), nasty)))
  .map(([name, value]) => ({
    type: 'webhook',
    payload: { url: 'https://hooks.example.com/x', ...{ [name]: value } },
    delayMs: 60_000,
  }));

const anyBody = fc.oneof(
  mutated,
  webhookField,
  nasty,
  deep,
  fc.dictionary(fc.string({ maxLength: 20 }), nasty, { maxKeys: 10 }),
  fc.record({ type: nasty, payload: fc.oneof(nasty, deep, fc.dictionary(fc.string(), nasty)), runAt: nasty }),
);

async function send(method: string, url: string, payload?: string | Buffer, contentType = 'application/json') {
  cases++;
  const response = await service.app.inject({
    method: method as 'POST',
    url,
    headers: { ...auth, ...(payload === undefined ? {} : { 'content-type': contentType }) },
    payload,
  });
  return { status: response.statusCode, body: response.body };
}

function expectAnswer({ status, body }: { status: number; body: string }): void {
  expect(status, body).toBeLessThan(500);
  if (status >= 400) {
    const parsed = JSON.parse(body) as { statusCode: number; message: string; error: string };
    expect(parsed.statusCode).toBe(status);
    expect(parsed.message.length).toBeGreaterThan(0);
  }
}

async function rows(): Promise<number> {
  const [row] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
  return Number(row.n);
}

describe('fuzzing', () => {
  it('POST /tasks answers every body with a 201 or a 4xx, and only a 201 writes a row', async () => {
    await fc.assert(
      fc.asyncProperty(anyBody, async (body) => {
        const answer = await send('POST', '/tasks', text(body));
        expectAnswer(answer);
        if (answer.status === 201) created++;
      }),
      { numRuns: RUNS },
    );
    expect(await rows()).toBe(created);
  });

  it('POST /tasks answers bytes that are not JSON, in any content type, with a 4xx', async () => {
    const before = await rows();
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 2000 }),
        fc.constantFrom(
          'application/json',
          'application/json; charset=latin1',
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data',
        ),
        async (bytes, type) => expectAnswer(await send('POST', '/tasks', Buffer.from(bytes), type)),
      ),
      { numRuns: Math.ceil(RUNS / 4) },
    );
    expect(await rows()).toBe(before);
  });

  it('the other routes answer any id, key, query and body with a 2xx or a 4xx', async () => {
    const before = await rows();
    const segment = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.integer().map(String),
      fc.constantFrom('0', '-1', '1e3', '9007199254740993', '%00', '..', 'null'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          'GET /tasks/:x',
          'POST /tasks/:x/cancel',
          'POST /tasks/:x/reschedule',
          'GET /tasks/by-key/:x',
          'POST /tasks/by-key/:x/cancel',
          'GET /tasks/pending?limit=:x',
          'GET /tasks/pending?cursor=:x',
          'GET /tasks/pending?type=:x',
        ),
        segment,
        anyBody,
        async (route, value, body) => {
          const [method, path] = route.split(' ') as [string, string];
          const url = path.replace(':x', encodeURIComponent(value));
          expectAnswer(await send(method, url, method === 'POST' ? text(body) : undefined));
        },
      ),
      { numRuns: RUNS },
    );
    expect(await rows()).toBe(before);
    expect((await service.call('GET', '/healthz')).status).toBe(200);
  });
});

describe('cases fuzzing found', () => {
  /** A webhook whose body nests `levels` deep, so the payload nests one more. */
  const deepWebhook = (levels: number) =>
    text({ type: 'webhook', payload: { url: 'https://hooks.example.com/x', body: `${DEEP}${levels}` }, delayMs: 60_000 });

  it('a webhook body nested to the limit is created, one level more refused with a 400, alike by POST /tasks and each batch item', async () => {
    // The table's JSON takes 31 nested arrays or objects: the payload plus 30 levels of body.
    for (const levels of [29, 30, 31, 32, 33]) {
      const before = await rows();
      const single = await send('POST', '/tasks', deepWebhook(levels));
      expectAnswer(single);
      expect(single.status, `${levels} levels: ${single.body}`).toBe(levels <= 30 ? 201 : 400);
      if (single.status === 400) expect(JSON.parse(single.body).message).toContain('body/payload');
      const item = deepWebhook(levels);
      const batch = await send('POST', '/tasks/batch', `{"tasks":[${item},${item.replace('"delayMs":60000', '"delayMs":60001')}]}`);
      expectAnswer(batch);
      expect(batch.status, batch.body).toBe(200);
      const results = JSON.parse(batch.body).results as { status: number; message?: string }[];
      expect(results.map((result) => result.status)).toEqual([single.status, single.status]);
      if (single.status === 400) expect(results[0]!.message).toBe(JSON.parse(single.body).message);
      expect(await rows()).toBe(before + (single.status === 201 ? 3 : 0));
      if (single.status === 201) created += 3;
    }
  });
});
