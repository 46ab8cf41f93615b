import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const SECRET = 'whsec-test-secret';
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/**
 * Headers a receiver or its proxy may take as the network's word about the call: who calls,
 * which method or URL is meant, how the body is framed, or punctual's own. A payload sets none.
 */
const SPOOFING_HEADERS = [
  // who the caller is, as a proxy or CDN says
  'X-Real-IP',
  'True-Client-IP',
  'X-Client-IP',
  'Client-IP',
  'X-Cluster-Client-IP',
  'X-Originating-IP',
  'X-Remote-IP',
  'X-Remote-Addr',
  'X-Original-Forwarded-For',
  'X-Forwarded-For',
  'X-Forwarded-Host',
  'X-Forwarded-Proto',
  'X-Forwarded',
  'Forwarded',
  'Via',
  'CF-Connecting-IP',
  'CF-Connecting-IPv6',
  'CF-IPCountry',
  'Fastly-Client-IP',
  'Akamai-Origin-Hop',
  'CloudFront-Viewer-Address',
  'X-Azure-ClientIP',
  'X-AppEngine-User-IP',
  'X-Vercel-Forwarded-For',
  'X-NF-Client-Connection-IP',
  'Fly-Client-IP',
  'Ali-CDN-Real-IP',
  'Cdn-Src-Ip',
  'EO-Connecting-IP',
  'X-Envoy-External-Address',
  'X-Amzn-Oidc-Identity',
  'X-Remote-User',
  'X-Auth-Request-Email',
  'X-Forwarded-Client-Cert',
  'X-SSL-Client-Verify',
  'X-Host',
  'X-Original-Host',
  'Origin',
  'Sec-Fetch-Site',
  // which method or URL is meant
  'X-HTTP-Method-Override',
  'X-HTTP-Method',
  'X-Method-Override',
  'X-Original-Method',
  'X-Original-URL',
  'X-Original-URI',
  'X-Rewrite-URL',
  'X-Forwarded-Uri',
  // the connection and the framing of the body
  'Host',
  'Content-Length',
  'Transfer-Encoding',
  'Connection',
  'Keep-Alive',
  'TE',
  'Upgrade',
  'Max-Forwards',
  'Proxy-Authorization',
  'Proxy-Connection',
  // punctual's own
  'Idempotency-Key',
  'X-Punctual-Signature',
  'X-Punctual-Task-Id',
  'User-Agent',
  // a name a CGI-style receiver (PHP's $_SERVER) reads as X-Real-IP, and other odd spellings
  'X_Real_IP',
  'x-real-ip',
  'X.Real.IP',
];

interface Received {
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

let db: TestDatabase;
let service: TestService | undefined;
let receiver: Server;
let base: string;
const received: Received[] = [];
/** How the receiver answers, by path: a list consumed one call at a time, the last one repeating. */
const script = new Map<string, ((res: import('node:http').ServerResponse) => void)[]>();

const ok = (res: import('node:http').ServerResponse) => res.writeHead(200).end('ok');
const fail500 = (res: import('node:http').ServerResponse) => res.writeHead(500).end('receiver broke');

beforeAll(async () => {
  db = await createTestDatabase('webhook');
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, method: req.method ?? '', headers: req.headers, body: Buffer.concat(chunks).toString(), at: Date.now() });
      const answers = script.get(path) ?? [ok];
      const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
      answer(res);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  received.length = 0;
  script.clear();
});

afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
  await db?.drop();
});

async function start(env: Record<string, string> = {}) {
  service = await startTestService(db, {
    WEBHOOK_SECRET: SECRET,
    WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    RETRY_BASE_MS: '100',
    ...env,
  });
  return service;
}

async function create(payload: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const answer = await service!.call('POST', '/tasks', { type: 'webhook', payload, delayMs: 0, ...extra });
  expect(answer.status).toBe(201);
  return answer.body;
}

function settled(id: number) {
  return waitFor(
    async () => {
      const t = (await service!.call('GET', `/tasks/${id}`)).body;
      return ['done', 'failed'].includes(t.status) ? t : undefined;
    },
    10_000,
    `task ${id} to settle`,
  );
}

/** What a receiver does to check a call: recompute the HMAC over the canonical string; any v2 may match. */
function verify(call: Received, body: string, secret: string): boolean {
  const [stamp, ...signatures] = String(call.headers['x-punctual-signature']).split(',');
  const t = /^t=(\d+)$/.exec(stamp ?? '')?.[1];
  if (t === undefined) return false;
  const bodyHash = createHash('sha256').update(body).digest('hex');
  const canonical = [t, call.method, `${base}${call.path}`, call.headers['idempotency-key'], bodyHash].join('\n');
  const expected = `v2=${createHmac('sha256', secret).update(canonical).digest('hex')}`;
  return signatures.includes(expected);
}

describe('webhook', () => {
  it('calls the URL with the body, a verifiable signature and an idempotency key', async () => {
    await start();
    const t = await create({ url: `${base}/orders/expired`, headers: { 'X-Shop': 'demo' }, body: { orderSn: 'SN1', reason: 'unpaid' } });
    expect(await settled(t.id)).toMatchObject({ status: 'done', attempts: 1 });
    expect(received).toHaveLength(1);
    const call = received[0]!;
    expect(call).toMatchObject({ path: '/orders/expired', method: 'POST' });
    expect(JSON.parse(call.body)).toEqual({ orderSn: 'SN1', reason: 'unpaid' });
    expect(call.headers['content-type']).toBe('application/json');
    expect(call.headers['x-shop']).toBe('demo');
    expect(call.headers['x-punctual-task-id']).toBe(String(t.id));
    expect(call.headers['x-punctual-attempt']).toBe('1');
    expect(call.headers['idempotency-key']).toMatch(/^punctual-\d+-\d+$/);
    expect(verify(call, call.body, SECRET)).toBe(true);
    expect(verify(call, call.body, 'another-secret')).toBe(false);
    expect(verify(call, `${call.body} `, SECRET)).toBe(false);
  });

  it('signs the URL as it is sent, for a URL ending in an empty query', async () => {
    await start();
    const t = await create({ url: `${base}/orders/expired?`, method: 'GET' });
    expect(await settled(t.id)).toMatchObject({ status: 'done', attempts: 1 });
    const call = received[0]!;
    // The empty query is not sent, so it is not signed either: the receiver's URL verifies.
    expect(call.path).toBe('/orders/expired');
    expect(verify(call, '', SECRET)).toBe(true);
  });

  it('retries a 5xx with the same idempotency key, and leases the task while it calls', async () => {
    await start();
    script.set('/flaky', [fail500, fail500, ok]);
    const t = await create({ url: `${base}/flaky`, body: { n: 1 } });
    const done = await settled(t.id);
    expect(done).toMatchObject({ status: 'done', attempts: 3 });
    expect(received.map((r) => r.headers['x-punctual-attempt'])).toEqual(['1', '2', '3']);
    expect(new Set(received.map((r) => r.headers['idempotency-key'])).size).toBe(1);
    const [row] = await db.query<any[]>('SELECT lease_owner, lease_until FROM punctual_tasks WHERE id = ?', [t.id]);
    expect(row).toEqual({ lease_owner: null, lease_until: null });
  });

  it("keeps each run's HTTP status, duration and response size on the task, a failing one's too", async () => {
    await start({ WEBHOOK_TIMEOUT_MS: '2000' });
    script.set('/slow-created', [(res) => void setTimeout(() => res.writeHead(201).end('created!'), 150)]);
    script.set('/flaky', [fail500, ok]);
    script.set('/broken', [fail500]);
    script.set('/silent', [() => undefined]); // never answers
    const waiting = await create({ url: `${base}/later` }, { delayMs: 3_600_000 });
    expect(waiting).toMatchObject({ lastHttpStatus: null, lastDurationMs: null, lastResponseBytes: null });
    const created = await create({ url: `${base}/slow-created` });
    const flaky = await create({ url: `${base}/flaky` });
    const broken = await create({ url: `${base}/broken` }, { maxAttempts: 1 });
    const silent = await create({ url: `${base}/silent` }, { maxAttempts: 1 });

    const done = await settled(created.id);
    expect(done).toMatchObject({ status: 'done', lastHttpStatus: 201, lastResponseBytes: 'created!'.length });
    expect(done.lastDurationMs).toBeGreaterThanOrEqual(140); // the receiver took 150 ms to answer
    // The latest run's: the 500 of the first attempt was replaced by the 200 of the second.
    expect(await settled(flaky.id)).toMatchObject({ status: 'done', attempts: 2, lastHttpStatus: 200, lastResponseBytes: 2 });
    const failed = await settled(broken.id);
    expect(failed).toMatchObject({ status: 'failed', lastHttpStatus: 500, lastResponseBytes: 'receiver broke'.length });
    expect(failed.lastDurationMs).toBeGreaterThanOrEqual(0);
    // No answer within WEBHOOK_TIMEOUT_MS: status 0, no body, the time it waited.
    const unanswered = await settled(silent.id);
    expect(unanswered).toMatchObject({ status: 'failed', lastHttpStatus: 0, lastResponseBytes: null });
    expect(unanswered.lastDurationMs).toBeGreaterThanOrEqual(1900);
    const [row] = await db.query<any[]>('SELECT last_http_status, last_response_bytes FROM punctual_tasks WHERE id = ?', [broken.id]);
    expect(row).toEqual({ last_http_status: 500, last_response_bytes: 14 });
  });

  it('fails at once on a 4xx, and on a redirect, which it does not follow', async () => {
    await start({ WEBHOOK_TRUSTED_HOSTS: '127.0.0.1' });
    script.set('/gone', [(res) => res.writeHead(410).end('order unknown')]);
    script.set('/moved', [(res) => res.writeHead(302, { location: `${base}/elsewhere` }).end()]);
    const gone = await create({ url: `${base}/gone` });
    const moved = await create({ url: `${base}/moved` });
    expect(await settled(gone.id)).toMatchObject({ status: 'failed', attempts: 1, lastError: 'answered 410: order unknown' });
    expect(await settled(moved.id)).toMatchObject({ status: 'failed', attempts: 1, lastError: 'answered 302: redirects are not followed' });
    expect(received.map((r) => r.path).sort()).toEqual(['/gone', '/moved']);
  });

  it('gives up on a receiver that does not answer in WEBHOOK_TIMEOUT_MS, and tries again', async () => {
    await start({ WEBHOOK_TIMEOUT_MS: '300' });
    script.set('/slow', [() => undefined, ok]); // the first call never gets an answer
    const t = await create({ url: `${base}/slow` });
    const done = await settled(t.id);
    // lastError describes the latest run, which succeeded; the timeout is in the run history.
    expect(done).toMatchObject({ status: 'done', attempts: 2, lastError: null });
    const runs = (await service!.call('GET', `/tasks/${t.id}/runs`)).body.runs;
    expect(runs.map((run: any) => run.outcome)).toEqual(['done', 'retry']);
    expect(runs[1].error).toMatch(/abort|timed out|timeout/i);
  });

  it('sends GET without a body', async () => {
    await start();
    const t = await create({ url: `${base}/ping?x=1`, method: 'GET', body: { ignored: true } });
    await settled(t.id);
    expect(received[0]).toMatchObject({ method: 'GET', path: '/ping?x=1', body: '' });
  });

  it('refuses hosts not listed, and headers it sets itself', async () => {
    await start({ WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com:8443' });
    const cases: [Record<string, unknown>, string][] = [
      [{ url: `${base}/x` }, 'body/payload/url host 127.0.0.1:'],
      [{ url: 'https://hooks.example.com/x' }, 'body/payload/url host hooks.example.com is not in WEBHOOK_ALLOWED_HOSTS'],
      [{ url: 'https://user:pw@hooks.example.com:8443/x' }, 'body/payload/url must not carry credentials'],
      [
        { url: 'https://hooks.example.com:8443/x', headers: { 'Idempotency-Key': 'mine' } },
        'body/payload/headers may not set Idempotency-Key',
      ],
      [
        { url: 'https://hooks.example.com:8443/x', headers: { 'X-Punctual-Signature': 'forged' } },
        'body/payload/headers may not set X-Punctual-Signature',
      ],
      [{ url: 'https://hooks.example.com:8443/x', method: 'TRACE' }, 'body/payload/method must be one of'],
    ];
    for (const [payload, message] of cases) {
      const answer = await service!.call('POST', '/tasks', { type: 'webhook', payload, delayMs: 0 });
      expect(answer.status, JSON.stringify(payload)).toBe(400);
      expect(answer.body.message).toContain(message);
    }
    const allowed = await service!.call('POST', '/tasks', {
      type: 'webhook',
      payload: { url: 'https://hooks.example.com:8443/x' },
      delayMs: 60_000,
    });
    expect(allowed.status).toBe(201);
  });

  it('refuses every header that could spoof the caller, the method or the URL, alone or in a batch', async () => {
    await start();
    const [before] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
    const payload = (name: string) => ({ url: `${base}/spoof`, headers: { 'X-Shop': 'demo', [name]: '127.0.0.1' } });
    for (const name of SPOOFING_HEADERS) {
      const answer = await service!.call('POST', '/tasks', { type: 'webhook', payload: payload(name), delayMs: 60_000 });
      expect(answer.status, name).toBe(400);
      expect(answer.body.message, name).toBe(`body/payload/headers may not set ${name}`);
    }
    const batch = await service!.call('POST', '/tasks/batch', {
      tasks: SPOOFING_HEADERS.map((name) => ({ type: 'webhook', payload: payload(name), delayMs: 60_000 })),
    });
    expect(batch.status).toBe(200);
    expect(batch.body).toMatchObject({ created: 0, refused: SPOOFING_HEADERS.length });
    expect(batch.body.results.map((r: { message: string }) => r.message)).toEqual(
      SPOOFING_HEADERS.map((name) => `body/payload/headers may not set ${name}`),
    );
    const [after] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
    expect(after.n).toBe(before.n);
    // The names a shop does use are still fine.
    const fine = { Authorization: 'Bearer shop-key', 'X-Api-Key': 'k', Cookie: 'a=b', 'X-Shop-Id': '42', Accept: 'application/json' };
    const allowed = await service!.call('POST', '/tasks', {
      type: 'webhook',
      payload: { url: `${base}/x`, headers: fine },
      delayMs: 60_000,
    });
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(201);
  });

  it('refuses at run time a spoofing header in a row written straight into the table', async () => {
    await start();
    const [result] = await db.pool.query<import('mysql2').ResultSetHeader>(
      "INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('webhook', ?, UTC_TIMESTAMP(3))",
      [JSON.stringify({ url: `${base}/inserted`, headers: { 'X-Real-IP': '10.0.0.1' } })],
    );
    await service!.scheduler.reconcile();
    const failed = await settled(result.insertId);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1 });
    expect(failed.lastError).toBe('payload/headers may not set X-Real-IP');
    expect(received).toEqual([]);
  });

  it('identifies as punctual/<version> and sends no browser headers', async () => {
    await start();
    const t = await create({ url: `${base}/who`, headers: { 'X-Shop': 'demo' }, body: { n: 1 } });
    expect(await settled(t.id)).toMatchObject({ status: 'done' });
    const call = received[0]!;
    expect(call.headers['user-agent']).toBe(`punctual/${version}`);
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    const browserish = Object.keys(call.headers).filter((name) => name.startsWith('sec-') || name === 'accept-language');
    expect(browserish).toEqual([]);
    expect(call.headers['x-shop']).toBe('demo');
    expect(verify(call, call.body, SECRET)).toBe(true);
  });

  it('refuses a listed name that resolves to an internal address not listed itself (DNS rebinding)', async () => {
    const port = new URL(base).port;
    await start({ WEBHOOK_ALLOWED_HOSTS: 'localhost' });
    const t = await create({ url: `http://localhost:${port}/rebound` });
    const failed = await settled(t.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1 });
    expect(failed.lastError).toContain('address 127.0.0.1 is internal');
    expect(received).toEqual([]);
    await service!.stop();
    // Listing the address too lets it through.
    await start({ WEBHOOK_ALLOWED_HOSTS: 'localhost,127.0.0.1' });
    const allowed = await create({ url: `http://localhost:${port}/allowed` });
    expect(await settled(allowed.id)).toMatchObject({ status: 'done' });
    expect(received.map((r) => r.path)).toEqual(['/allowed']);
  });

  it('reads at most 64 KiB of an answer, however much the receiver sends', async () => {
    await start({ WEBHOOK_TRUSTED_HOSTS: '127.0.0.1' });
    let sent = 0;
    script.set('/firehose', [
      (res) => {
        res.writeHead(500);
        const chunk = Buffer.alloc(64 * 1024, 'x');
        const pump = () => {
          while (sent < 200 * 1024 * 1024 && res.write(chunk)) sent += chunk.length;
          if (sent < 200 * 1024 * 1024) res.once('drain', pump);
          else res.end();
        };
        res.on('close', () => undefined);
        pump();
      },
    ]);
    const started = Date.now();
    const t = await create({ url: `${base}/firehose` }, { maxAttempts: 1 });
    const failed = await settled(t.id);
    expect(failed.status).toBe('failed');
    expect(failed.lastError).toMatch(/^answered 500: x{200}$/);
    expect(failed).toMatchObject({ lastHttpStatus: 500, lastResponseBytes: 64 * 1024 });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(sent).toBeLessThan(50 * 1024 * 1024); // the reader hung up long before the 200 MB
  });

  it('signs with both keys while one replaces the other, so receivers can switch at their pace', async () => {
    await start({ WEBHOOK_SECRET: 'old-secret', WEBHOOK_SECRET_NEXT: 'new-secret' });
    const t = await create({ url: `${base}/rotating`, body: { n: 1 } });
    await settled(t.id);
    const call = received[0]!;
    expect(String(call.headers['x-punctual-signature'])).toMatch(/^t=\d+,v2=[0-9a-f]{64},v2=[0-9a-f]{64}$/);
    expect(verify(call, call.body, 'old-secret')).toBe(true);
    expect(verify(call, call.body, 'new-secret')).toBe(true);
    expect(verify(call, call.body, 'other-secret')).toBe(false);
  });

  it('is off until WEBHOOK_SECRET is set', async () => {
    service = await startTestService(db, { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' });
    const answer = await service.call('POST', '/tasks', { type: 'webhook', payload: { url: `${base}/x` }, delayMs: 0 });
    expect(answer).toMatchObject({
      status: 400,
      body: { message: 'body/payload cannot be sent: webhooks are off until WEBHOOK_SECRET is set' },
    });
  });

  /** A row as a crashed process leaves it: running, leased by someone gone, lease over. */
  async function leftByACrash(path: string, misfire = 'run'): Promise<number> {
    const [result] = await db.pool.query<import('mysql2').ResultSetHeader>(
      `INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, misfire, lease_owner, lease_until)
       VALUES ('webhook', ?, UTC_TIMESTAMP(3) - INTERVAL 2 MINUTE, 'running', 1, ?, 'gone:1:dead', UTC_TIMESTAMP(3) - INTERVAL 1 SECOND)`,
      [JSON.stringify({ url: `${base}${path}` }), misfire],
    );
    return result.insertId;
  }

  it('runs a webhook again when the process that claimed it died (its lease ran out)', async () => {
    await start();
    const id = await leftByACrash('/recovered');
    await service!.scheduler.reconcile();
    const done = await settled(id);
    expect(done).toMatchObject({ status: 'done', attempts: 2 });
    expect(received.map((r) => [r.path, r.headers['x-punctual-attempt']])).toEqual([['/recovered', '2']]);
  });

  it('recovers such a task at boot and runs it, even with misfire skip: it was running, not missed', async () => {
    const id = await leftByACrash('/recovered-at-boot', 'skip');
    await start();
    expect(await settled(id)).toMatchObject({ status: 'done', attempts: 2 });
    expect(received.map((r) => r.path)).toEqual(['/recovered-at-boot']);
  });

  it('fails such a task at boot when it has used all its attempts', async () => {
    const id = await leftByACrash('/never');
    await db.execute('UPDATE punctual_tasks SET max_attempts = 1 WHERE id = ?', [id]);
    await start();
    const [row] = await db.query<any[]>('SELECT status, last_error, lease_owner FROM punctual_tasks WHERE id = ?', [id]);
    expect(row).toMatchObject({ status: 'failed', lease_owner: null });
    expect(row.last_error).toContain('lease expired');
    expect(received).toEqual([]);
  });
});
