/**
 * A hostile caller against the real server (node dist/app/main.js as a child process), one attack per
 * test, each asserting that it is refused and changed nothing. The webhook cases call receivers
 * on 127.0.0.1 that this file starts: a shop's receiver, and an "internal service" that must stay
 * out of reach.
 */
import { spawnSync } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, request as httpRequest, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { type ServerProcess, startServer, waitFor } from '../helpers/server.js';

const TOKEN = 'attack-test-token-0123456789';
const SECRET = 'attack-test-webhook-secret';
const MAIN = fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));

// Each test starts a server (or six): generous on a busy machine, the checks themselves are not timed by this.
vi.setConfig({ testTimeout: 180_000 });

interface Call {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let db: TestDatabase;
let server: ServerProcess | undefined;
/** The shop's webhook receiver: records calls, answers 200 (or 500 with an error page on /error). */
let receiver: Server;
let receiverPort: number;
const received: Call[] = [];
/** A service on the same machine that no webhook may reach. */
let internal: Server;
let internalPort: number;
const reachedInternal: Call[] = [];

function listen(record: Call[], answer: (call: Call, res: import('node:http').ServerResponse) => void): Promise<[Server, number]> {
  const http = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const call = { method: req.method!, path: req.url!, headers: req.headers, body };
      record.push(call);
      answer(call, res);
    });
  });
  return new Promise((resolve) => http.listen(0, '127.0.0.1', () => resolve([http, (http.address() as AddressInfo).port])));
}

beforeAll(async () => {
  db = await createTestDatabase('attacks');
  [receiver, receiverPort] = await listen(received, (call, res) => {
    if (call.path.startsWith('/lines')) {
      // An error page that would cut a log line in two (U+2028, NEL) and act on a terminal (8-bit CSI, bidi override).
      res
        .writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
        .end('bad\u2028{"level":60,"msg":"forged"}\u0085\u009b2J\u202eevil');
    } else if (call.path.startsWith('/busy')) {
      res.writeHead(503, { 'retry-after': '30' }).end('busy');
    } else if (call.path.startsWith('/error')) {
      res
        .writeHead(500, { 'content-type': 'text/html' })
        .end(`<h1>Internal Server Error</h1><pre>SECRET-STACK-TRACE db=prod-${'z'.repeat(600)}</pre>`);
    } else res.writeHead(200).end('ok');
  });
  [internal, internalPort] = await listen(reachedInternal, (_call, res) => {
    res.writeHead(500).end('INTERNAL-ADMIN-PAGE: root password is hunter2');
  });
});

afterEach(async () => {
  await server?.stop();
  server = undefined;
  received.length = 0;
  reachedInternal.length = 0;
});

afterAll(async () => {
  for (const http of [receiver, internal]) {
    http?.closeAllConnections();
    await new Promise((resolve) => http?.close(resolve));
  }
  await db?.drop();
});

async function start(env: Record<string, string> = {}): Promise<ServerProcess> {
  server = await startServer({ env: { DATABASE_URL: db.url, ...env }, timeoutMs: 60_000 });
  return server;
}

/** A request with full control of its headers (fetch would not let a test set Host). */
function raw(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: any }> {
  const url = new URL(path, server!.baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON: keep the text
        }
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function createTask(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<any> {
  const answer = await server!.request('POST', '/tasks', body, headers);
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body;
}

async function statusOf(id: number): Promise<string> {
  const [row] = await db.query<any[]>('SELECT status FROM punctual_tasks WHERE id = ?', [id]);
  return row.status;
}

async function taskCount(): Promise<number> {
  const [row] = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
  return Number(row.n);
}

describe('cross-site requests and DNS rebinding, without a token (finding 1)', () => {
  it('refuses a cross-site cancel or retry, a non-JSON body and a foreign Host', async () => {
    await start({ ALLOWED_HOST_NAMES: 'punctual.internal' });
    const port = new URL(server!.baseUrl).port;
    const tasksBefore = await taskCount();
    const task = await createTask({ type: 'close_order', payload: { orderSn: 'CSRF1' }, delayMs: 3_600_000, key: 'close_order:CSRF1' });

    // A web page the operator visits posts a "simple" request: text/plain, or no body at all.
    const crossSite = { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' };
    const attempts = [
      raw('POST', '/tasks/by-key/close_order%3ACSRF1/cancel', { ...crossSite, 'content-type': 'text/plain' }, '{}'),
      raw('POST', '/tasks/by-key/close_order%3ACSRF1/cancel', crossSite),
      raw('POST', `/tasks/${task.id}/cancel`, { origin: 'https://evil.example' }),
      raw('POST', `/tasks/${task.id}/cancel`, { 'sec-fetch-site': 'same-site' }),
      raw('POST', `/tasks/${task.id}/cancel`, { origin: 'null' }),
      raw('POST', `/tasks/${task.id}/retry`, crossSite),
    ];
    for (const answer of await Promise.all(attempts)) {
      expect(answer.status).toBe(403);
      expect(answer.body.code).toBe('PUNCTUAL_CROSS_SITE');
    }
    // An old browser that sends no Origin still cannot send a body that is not JSON.
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const answer = await raw('POST', `/tasks/${task.id}/cancel`, { 'content-type': type }, 'a=1');
      expect(answer.status, type).toBe(415);
    }
    const created = await raw(
      'POST',
      '/tasks',
      { 'content-type': 'text/plain' },
      JSON.stringify({ type: 'close_order', payload: { orderSn: 'X' }, delayMs: 0 }),
    );
    expect(created.status).toBe(415);
    expect(await statusOf(task.id)).toBe('pending');
    expect(await taskCount()).toBe(tasksBefore + 1);

    // A DNS-rebinding page reaches 127.0.0.1 under its own name.
    for (const host of [`rebind.evil.example:${port}`, 'evil.example', `127.0.0.1.evil.example:${port}`]) {
      const answer = await raw('GET', '/tasks/pending', { host });
      expect(answer.status, host).toBe(403);
      expect(answer.body.code).toBe('PUNCTUAL_HOST_NOT_ALLOWED');
    }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `punctual.internal:${port}`]) {
      expect((await raw('GET', '/tasks/pending', { host })).status, host).toBe(200);
    }

    // The dashboard's own same-origin request, and a plain client's, still work.
    const sameOrigin = await raw('POST', `/tasks/${task.id}/cancel`, {
      origin: `http://127.0.0.1:${port}`,
      'sec-fetch-site': 'same-origin',
    });
    expect(sameOrigin.status).toBe(200);
    expect(await statusOf(task.id)).toBe('cancelled');
    const other = await createTask({ type: 'close_order', payload: { orderSn: 'CSRF2' }, delayMs: 3_600_000 });
    expect((await raw('POST', `/tasks/${other.id}/cancel`)).status).toBe(200);
  });
});

describe('the bearer token', () => {
  it('accepts the scheme in any case, and slows down a client guessing the token (429)', async () => {
    await start({ API_TOKEN: TOKEN, AUTH_FAILURES_PER_MINUTE: '5' });
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      expect((await raw('GET', '/tasks/pending', { authorization: `${scheme} ${TOKEN}` })).status, scheme).toBe(200);
    }
    const guesses: number[] = [];
    for (let i = 0; i < 8; i++) guesses.push((await raw('GET', '/tasks/pending', { authorization: `Bearer guess-${i}` })).status);
    expect(guesses).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);
    // The limit holds for every route while it lasts.
    expect((await raw('GET', '/tasks/summary', { authorization: 'Bearer guess-9' })).status).toBe(429);
    expect((await raw('GET', '/healthz')).status).toBe(200);
  });

  it('answers 429 to the right token too once the address is over its budget, on known and unknown routes', async () => {
    await start({ API_TOKEN: TOKEN, AUTH_FAILURES_PER_MINUTE: '5' });
    for (let i = 0; i < 5; i++) expect((await raw('GET', '/tasks/pending', { authorization: `Bearer guess-${i}` })).status).toBe(401);
    // Were the right token let through, 200 against 429 would tell the guess that found it.
    const right = { authorization: `Bearer ${TOKEN}` };
    const answers = {
      known: await raw('GET', '/tasks/pending', right),
      unknown: await raw('GET', '/nope', right),
      unknownMethod: await raw('PATCH', '/tasks/pending', right),
      wrong: await raw('GET', '/tasks/pending', { authorization: 'Bearer guess-x' }),
    };
    for (const [which, answer] of Object.entries(answers)) {
      expect(answer.status, which).toBe(429);
      expect(answer.body.code, which).toBe('PUNCTUAL_TOO_MANY_AUTH_FAILURES');
      expect(Number(answer.headers['retry-after']), which).toBeGreaterThan(0);
    }
    // The public routes stay reachable: a probe on the same address must not be locked out.
    for (const path of ['/healthz', '/readyz', '/openapi.json', '/']) expect((await raw('GET', path)).status, path).toBe(200);
  });

  it('names the client address in the log line of each refused request, as the notes on shared budgets promise', async () => {
    await start({ API_TOKEN: TOKEN });
    const refused = await raw('GET', '/tasks/pending', { authorization: 'Bearer wrong-token-0123456789' });
    expect(refused.status).toBe(401);
    const line = await waitFor(
      async () => server!.logs.find((entry) => entry.msg === 'request refused' && entry.statusCode === 401),
      5_000,
      'the request refused line',
    );
    expect(line).toMatchObject({ url: '/tasks/pending', remoteAddress: '127.0.0.1' });
  });

  it('counts wrong tokens on unknown routes and methods: 30 guesses on /nope, then 429', async () => {
    await start({ API_TOKEN: TOKEN, AUTH_FAILURES_PER_MINUTE: '30' });
    // A valid token on an unknown route is told 404; a wrong one gets a 401 that counts.
    expect((await raw('GET', '/nope', { authorization: `Bearer ${TOKEN}` })).status).toBe(404);
    const guesses: number[] = [];
    for (let i = 0; i < 30; i++) {
      const [method, path] = i % 3 === 0 ? ['PROPFIND', '/tasks'] : i % 3 === 1 ? ['DELETE', '/healthz/x'] : ['GET', '/nope'];
      guesses.push((await raw(method, path, { authorization: `Bearer guess-${i}` })).status);
    }
    expect(guesses).toEqual(Array.from({ length: 30 }, () => 401));
    expect((await raw('GET', '/nope', { authorization: 'Bearer guess-30' })).status).toBe(429);
    expect((await raw('GET', '/nope', { authorization: `Bearer ${TOKEN}` })).status).toBe(429);
    expect((await raw('GET', '/tasks/pending', { authorization: `Bearer ${TOKEN}` })).status).toBe(429);
  });
});

/** Opens a socket and resolves when the server closes it, with how long that took. */
function whenClosed(socket: Socket, started: number): Promise<number> {
  return new Promise((resolve) => socket.on('close', () => resolve(Date.now() - started)));
}

describe('slow clients (finding 5)', () => {
  it('cuts a body that trickles in, even after its 401, within REQUEST_TIMEOUT_MS', async () => {
    await start({ API_TOKEN: TOKEN, REQUEST_TIMEOUT_MS: '2000', HEADERS_TIMEOUT_MS: '1000' });
    const { port } = new URL(server!.baseUrl);
    for (const auth of ['', `Authorization: Bearer ${TOKEN}\r\n`]) {
      const socket = connect(Number(port), '127.0.0.1');
      const started = Date.now();
      const closed = whenClosed(socket, started);
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      socket.on('error', () => undefined);
      socket.write(
        `POST /tasks HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`,
      );
      const trickle = setInterval(() => socket.write(' '), 200);
      const ms = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 15_000))]);
      clearInterval(trickle);
      socket.destroy();
      console.log(`slow body ${auth === '' ? 'without' : 'with'} a token: cut after ${ms} ms (REQUEST_TIMEOUT_MS 2000)`);
      // The deadline plus Node's once-a-second check, and room for a busy machine.
      expect(ms).toBeLessThan(6000);
    }
  });

  it('closes a connection that never finishes its headers, and caps the connections', async () => {
    await start({ HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '3000', MAX_CONNECTIONS: '5' });
    const { port } = new URL(server!.baseUrl);
    const silent = connect(Number(port), '127.0.0.1');
    silent.on('error', () => undefined);
    silent.resume(); // read what the server sends (its 408), or 'close' never comes
    silent.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    expect(
      await Promise.race([whenClosed(silent, Date.now()), new Promise<number>((r) => setTimeout(() => r(Infinity), 15_000))]),
    ).toBeLessThan(8000);

    // Five keep-alive connections that each got an answer: the sixth is dropped unanswered.
    const held: Socket[] = [];
    for (let i = 0; i < 5; i++) {
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => undefined);
      held.push(socket);
      await new Promise<void>((resolve) => {
        socket.once('data', () => resolve());
        socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      });
    }
    const extra = connect(Number(port), '127.0.0.1');
    extra.on('error', () => undefined);
    let answered = false;
    extra.on('data', () => (answered = true));
    extra.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    expect(
      await Promise.race([whenClosed(extra, Date.now()), new Promise<number>((r) => setTimeout(() => r(Infinity), 15_000))]),
    ).toBeLessThan(15_000);
    expect(answered).toBe(false);
    for (const socket of held) socket.destroy();
    await waitFor(async () => (await fetch(`${server!.baseUrl}/healthz`).catch(() => undefined))?.status === 200, 5000, 'a free slot');
  });
});

describe('a bad DATABASE_URL (finding 11)', () => {
  it('never prints its password', () => {
    const password = 'hunter2-pa55word';
    const urls = [
      `mysql://root:${password}@127.0.0.1:99999/punctual`, // not a URL (port out of range)
      `mysql://root:${password}@127.0.0.1:3306/bad name`, // bad database name
      `postgres://root:${password}@127.0.0.1/punctual`, // wrong scheme
      `mysql://root:${password}@127.0.0.1:1/punctual_test_never`, // nothing listens there
      `mysql://no_such_user:${password}@127.0.0.1:3306/punctual_test_never`, // access denied
      `mysql://root:p@ss:${password}@[::1:3306/punctual`, // garbage with '@' and ':' in the password
    ];
    for (const url of urls) {
      const run = spawnSync(process.execPath, [MAIN], {
        // DB_WAIT_MS 0: a database that does not answer is a failure at once, not a wait.
        env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: url, DB_WAIT_MS: '0' },
        encoding: 'utf8',
        timeout: 30_000,
      });
      const output = `${run.stdout}\n${run.stderr}`;
      expect(run.status, output).toBe(1);
      expect(output, url).not.toContain(password);
      expect(output, url).toMatch(/DATABASE_URL|could not start/);
    }
  });
});

describe('webhooks against the shop (findings 2, 3, 6, 7, 8)', () => {
  function settled(id: number) {
    return waitFor(
      async () => {
        const task = (await server!.request('GET', `/tasks/${id}`)).body;
        return ['done', 'failed'].includes(task.status) ? task : undefined;
      },
      15_000,
      `task ${id} to settle`,
    );
  }

  it('never widens a host:port entry to the other ports of that address, whatever the name', async () => {
    await start({ WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort},localhost` });
    const attack = await createTask({
      type: 'webhook',
      payload: { url: `http://localhost:${internalPort}/admin` },
      delayMs: 0,
      maxAttempts: 1,
    });
    const failed = await settled(attack.id);
    expect(failed.status).toBe('failed');
    expect(failed.lastError).toContain('refused');
    expect(failed.lastError).not.toContain('INTERNAL-ADMIN-PAGE');
    expect(reachedInternal).toEqual([]);
    // The listed pair itself still works.
    const ok = await createTask({ type: 'webhook', payload: { url: `http://127.0.0.1:${receiverPort}/fine` }, delayMs: 0 });
    expect(await settled(ok.id)).toMatchObject({ status: 'done' });
    expect(received.map((call) => call.path)).toEqual(['/fine']);
  });

  it('signs method, URL, idempotency key and body: the receiver snippet of the docs accepts the call and refuses any replay of it', async () => {
    const hostSecret = 'receiver-own-secret-0123456789';
    await start({
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
      WEBHOOK_HOST_SECRETS: `127.0.0.1:${receiverPort}=${hostSecret}`,
    });
    const first = await createTask({
      type: 'webhook',
      payload: { url: `http://127.0.0.1:${receiverPort}/orders/expired?sn=1`, body: { orderSn: 'S1' } },
      delayMs: 0,
    });
    const second = await createTask({
      type: 'webhook',
      payload: { url: `http://127.0.0.1:${receiverPort}/orders/refund`, method: 'DELETE' },
      delayMs: 0,
    });
    await settled(first.id);
    await settled(second.id);
    const [post, del] = [received.find((c) => c.method === 'POST')!, received.find((c) => c.method === 'DELETE')!];

    const { verifyPunctual } = await docsReceiver();
    const origin = `http://127.0.0.1:${receiverPort}`;
    const check = (
      call: Call,
      over: Partial<{ method: string; url: string; rawBody: string; secrets: string[]; now: number; key: string }> = {},
    ) =>
      verifyPunctual({
        method: over.method ?? call.method,
        url: over.url ?? new URL(call.path, origin).href,
        headers: { ...call.headers, ...(over.key === undefined ? {} : { 'idempotency-key': over.key }) },
        rawBody: over.rawBody ?? call.body,
        secrets: over.secrets ?? [hostSecret],
        now: over.now,
      });
    expect(check(post)).toBe(true);
    expect(check(del)).toBe(true);
    // The host's own key signs its calls; the global one (known to other receivers) does not.
    expect(check(post, { secrets: [SECRET] })).toBe(false);
    // The same signature replayed for another method, URL, task or body is refused…
    expect(check(post, { method: 'PUT' })).toBe(false);
    expect(check(post, { url: `${origin}/orders/expired?sn=2` })).toBe(false);
    expect(check(post, { key: del.headers['idempotency-key'] as string })).toBe(false);
    expect(check(post, { rawBody: '{"orderSn":"S2"}' })).toBe(false);
    // …a body-less call's signature does not fit another body-less call…
    expect(check({ ...del, path: '/orders/expired?sn=1', method: 'DELETE' })).toBe(false);
    // …and a replay outside the five-minute window is refused.
    const t = Number(/t=(\d+)/.exec(String(post.headers['x-punctual-signature']))![1]);
    expect(check(post, { now: t + 5 * 60_000 + 1 })).toBe(false);
    expect(check(post, { now: t + 60_000 })).toBe(true);
  });

  it('refuses malformed and hop-by-hop or spoofing headers at create, with a 400 (findings 6 and 7)', async () => {
    await start({ WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}` });
    const url = `http://127.0.0.1:${receiverPort}/x`;
    const before = await taskCount();
    const bad: Record<string, unknown>[] = [
      { 'Host ': 'evil.example' },
      { 'X Shop': 'a' },
      { 'X-Shop\r\nX-Injected': 'a' },
      { 'X-Nested': { a: 1 } },
      { '': 'a' },
      ...[
        'Keep-Alive',
        'Upgrade',
        'Expect',
        'TE',
        'Proxy-Authorization',
        'Proxy-Connection',
        'Content-Encoding',
        'X-Forwarded-For',
        'x-forwarded-host',
        'Forwarded',
      ].map((name) => ({ [name]: 'x' })),
    ];
    for (const headers of bad) {
      const answer = await server!.request('POST', '/tasks', { type: 'webhook', payload: { url, headers }, delayMs: 0 });
      expect(answer.status, JSON.stringify(headers)).toBe(400);
      expect(answer.body.message).toMatch(/headers/);
    }
    expect(await taskCount()).toBe(before);
    await createTask({ type: 'webhook', payload: { url, headers: { 'X-Shop': 'demo' } }, delayMs: 60_000 });
  });

  it('keeps an untrusted host’s error page out of lastError; a trusted host gets a short excerpt (finding 8)', async () => {
    await start({
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort},localhost:${receiverPort},127.0.0.1:${internalPort}`,
      WEBHOOK_TRUSTED_HOSTS: `localhost:${receiverPort}`,
    });
    const untrusted = await createTask({
      type: 'webhook',
      payload: { url: `http://127.0.0.1:${internalPort}/admin` },
      delayMs: 0,
      maxAttempts: 1,
    });
    const failed = await settled(untrusted.id);
    expect(failed.status).toBe('failed');
    expect(failed.lastError).toMatch(/^answered 500 with \d+ bytes/);
    expect(failed.lastError).not.toContain('INTERNAL-ADMIN-PAGE');
    const trusted = await createTask({
      type: 'webhook',
      payload: { url: `http://localhost:${receiverPort}/error` },
      delayMs: 0,
      maxAttempts: 1,
    });
    const quoted = await settled(trusted.id);
    expect(quoted.lastError).toContain('SECRET-STACK-TRACE');
    expect(quoted.lastError.length).toBeLessThanOrEqual(250);
  });
});

describe('browser-facing headers (finding 10)', () => {
  it('sends CSP, frame, sniffing and referrer headers on every page and answer', async () => {
    await start({ API_TOKEN: TOKEN });
    for (const path of ['/', '/console/tasks/failed', '/ui/app.js', '/tasks/pending', '/healthz', '/docs']) {
      const { headers } = await raw('GET', path, { authorization: `Bearer ${TOKEN}` });
      expect(headers['content-security-policy'], path).toContain("frame-ancestors 'none'");
      expect(headers['content-security-policy'], path).toContain("script-src 'self'");
      expect(headers['x-frame-options'], path).toBe('DENY');
      expect(headers['x-content-type-options'], path).toBe('nosniff');
      expect(headers['referrer-policy'], path).toBe('no-referrer');
    }
  });
});

describe('type limits grouped by a name every object has', () => {
  it('still run the type’s tasks when groupBy is constructor, toString or __proto__, grouped by the payload’s own field', async () => {
    await start({ WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}` });
    for (const name of ['constructor', 'toString', '__proto__']) {
      const limits = await server!.request('PUT', '/types/webhook/limits', { groupBy: name, maxConcurrency: 2 });
      expect(limits.status, JSON.stringify(limits.body)).toBe(200);
      const task = await createTask({
        type: 'webhook',
        payload: { url: `http://127.0.0.1:${receiverPort}/grouped-${name}` },
        delayMs: 0,
        maxAttempts: 1,
      });
      const settled = await waitFor(
        async () => {
          const now = (await server!.request('GET', `/tasks/${task.id}`)).body;
          return ['done', 'failed'].includes(now.status) ? now : undefined;
        },
        15_000,
        `task ${task.id} (groupBy ${name}) to run`,
      );
      expect(settled.status, settled.lastError).toBe('done');
    }
    expect(received.map((call) => call.path)).toEqual(['/grouped-constructor', '/grouped-toString', '/grouped-__proto__']);
    expect(server!.logs.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([]);
  });
});

describe('log lines', () => {
  it('carry a task’s key and a receiver’s error escaped: no line separator, NEL, 8-bit CSI or bidi override raw', async () => {
    await start({
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
      WEBHOOK_TRUSTED_HOSTS: `127.0.0.1:${receiverPort}`,
    });
    const key = 'log:x\u2028{"level":60,"msg":"forged"}\u2029\u0085\u009b2J\u202eevil';
    const done = await createTask({ type: 'webhook', payload: { url: `http://127.0.0.1:${receiverPort}/fine` }, delayMs: 0, key });
    const failed = await createTask({
      type: 'webhook',
      payload: { url: `http://127.0.0.1:${receiverPort}/lines` },
      delayMs: 0,
      maxAttempts: 1,
      key: `${key}:2`,
    });
    const lines = await waitFor(
      async () => {
        const found = server!.logs.filter((line) => line.taskId === done.id || line.taskId === failed.id);
        return found.some((line) => line.msg === 'task done') && found.some((line) => line.msg === 'task failed') ? found : undefined;
      },
      15_000,
      'the run lines of both tasks',
    );
    // eslint-disable-next-line no-control-regex -- control characters are what must not be there
    const raw = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
    for (const line of lines) {
      expect(String(line.key), line.msg).not.toMatch(raw);
      expect(String(line.key), line.msg).toContain('\\u2028');
      if (typeof line.error === 'string') expect(line.error).not.toMatch(raw);
    }
    expect(String(lines.find((line) => line.msg === 'task failed')!.error)).toContain('forged');
    // The stored error (the dashboard's, the run history's) is the excerpt without them too.
    const stored = (await server!.request('GET', `/tasks/${failed.id}`)).body;
    expect(stored.lastError).toContain('forged');
    expect(stored.lastError).not.toMatch(raw);
  });
});

describe("a handler's answer in the run line (fourth review, finding 1)", () => {
  it('is escaped, bounded as the stored result, and only a string: an object answer, a 300 KB one and one with line breakers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'punctual-answers-'));
    try {
      const module = join(dir, 'answers.mjs');
      writeFileSync(
        module,
        `export default [
          { type: 'echo_note', effect: 'database', payload: { type: 'object' }, run: async ({ payload }) => 'closed ' + payload.note },
          { type: 'echo_long', effect: 'database', payload: { type: 'object' }, run: async () => 'x'.repeat(300000) },
          { type: 'echo_object', effect: 'database', payload: { type: 'object' }, run: async () => ({ authorization: 'Bearer leaked-token-0123' }) },
        ];`,
      );
      await start({ HANDLERS: module });
      const note = await createTask({
        type: 'echo_note',
        payload: { note: 'a\u2028{"level":60,"msg":"forged"}\u0085\u009b2J\u202eevil' },
        delayMs: 0,
      });
      const long = await createTask({ type: 'echo_long', payload: {}, delayMs: 0 });
      const object = await createTask({ type: 'echo_object', payload: {}, delayMs: 0 });
      const ids = [note.id, long.id, object.id];
      const lines = await waitFor(
        async () => {
          const done = server!.logs.filter((line) => line.msg === 'task done' && ids.includes(line.taskId as number));
          return done.length === 3 ? done : undefined;
        },
        15_000,
        'the three run lines',
      );
      const of = (id: number) => lines.find((line) => line.taskId === id)!;
      // eslint-disable-next-line no-control-regex -- control characters are what must not be there
      const raw = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
      expect(String(of(note.id).outcome)).not.toMatch(raw);
      expect(String(of(note.id).outcome)).toContain('forged');
      expect(String(of(long.id).outcome).length).toBeLessThanOrEqual(200);
      expect(JSON.stringify(of(long.id)).length).toBeLessThan(1000);
      expect(of(object.id).outcome).toBe('done');
      expect(JSON.stringify(server!.logs)).not.toContain('leaked-token');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a failure notice waiting to be sent (fourth review, finding 2)', () => {
  it('cannot be edited, moved, cancelled, deleted or reached by a bulk change through the API', async () => {
    await start({
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
      NOTIFY_URL: `http://127.0.0.1:${receiverPort}/busy`,
    });
    const victim = await createTask({
      type: 'webhook',
      payload: { url: `http://127.0.0.1:${receiverPort}/error` },
      delayMs: 0,
      maxAttempts: 1,
    });
    const key = `punctual:notify:failed:${victim.id}:1`;
    // The receiver answers 503 with Retry-After: 30, so the notice waits, pending, for its next attempt.
    const notice = await waitFor(
      async () => {
        const answer = await server!.request('GET', `/tasks/by-key/${encodeURIComponent(key)}`);
        return answer.status === 200 && answer.body.status === 'pending' && answer.body.attempts === 1 ? answer.body : undefined;
      },
      20_000,
      'the notice to wait for its retry',
    );
    const before = await db.query<any[]>('SELECT * FROM punctual_tasks WHERE id = ?', [notice.id]);
    const singles = [
      server!.request('PUT', `/tasks/${notice.id}/payload`, {
        payload: { url: `http://127.0.0.1:${receiverPort}/elsewhere`, method: 'POST' },
      }),
      server!.request('POST', `/tasks/${notice.id}/reschedule`, { runAt: '2035-01-01T00:00:00Z' }),
      server!.request('POST', `/tasks/${notice.id}/cancel`),
      server!.request('POST', `/tasks/by-key/${encodeURIComponent(key)}/cancel`),
      server!.request('DELETE', `/tasks/${notice.id}`),
    ];
    for (const answer of await Promise.all(singles)) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(403);
      expect(answer.body.code).toBe('PUNCTUAL_RESERVED_TASK');
    }
    const bulks = [
      server!.request('POST', '/tasks/bulk/cancel', { keyPrefix: 'punctual:notify:' }),
      server!.request('POST', '/tasks/bulk/cancel', { ids: [notice.id] }),
      server!.request('POST', '/tasks/bulk/reschedule', { keyPrefix: key, shiftMs: 86_400_000, requestId: 'attack' }),
      server!.request('POST', '/tasks/bulk/reschedule', { keyPrefix: 'punctual:', runAt: '2035-01-01T00:00:00Z' }),
    ];
    for (const answer of await Promise.all(bulks)) expect(answer.body, JSON.stringify(answer.body)).toMatchObject({ changed: 0 });
    expect(await db.query<any[]>('SELECT * FROM punctual_tasks WHERE id = ?', [notice.id])).toEqual(before);
  });
});

describe('instants past what the database stores (fourth review, finding 3)', () => {
  it('are refused with a 400 naming the field and the range, in filters, cursors and moves', async () => {
    await start();
    const pending = await createTask({ type: 'close_order', payload: { orderSn: 'RANGE1' }, delayMs: 3_600_000 });
    const cursor = (runAt: number) => Buffer.from(`${runAt}.1`).toString('base64url');
    const cases: [string, string, unknown, string][] = [
      ['GET', '/tasks?status=pending&dueFrom=9999-12-31T23:59:59-12:00', undefined, 'querystring/dueFrom'],
      ['GET', '/tasks?status=pending&dueUntil=0999-12-31T00:00:00Z', undefined, 'querystring/dueUntil'],
      ['GET', '/tasks/counts?dueFrom=9999-12-31T23:59:59-12:00', undefined, 'querystring/dueFrom'],
      ['GET', `/tasks/pending?cursor=${cursor(999_999_999_999_999)}`, undefined, 'querystring/cursor'],
      ['GET', '/audit?since=9999-12-31T23:59:59-12:00', undefined, 'querystring/since'],
    ];
    for (const [method, path, body, field] of cases) {
      const answer = await server!.request(method, path, body);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(400);
      expect(answer.body.message).toContain(field);
      expect(answer.body.message).toContain('must be between 1970-01-01T00:00:00.000Z and 6053-');
    }
    expect((await server!.request('GET', `/tasks/${pending.id}`)).body).toMatchObject({ status: 'pending', runAt: pending.runAt });
    // A shift never carries a task out of the range: one a shop wrote 6050-01-01 stays there.
    await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, task_key) VALUES ('close_order', JSON_OBJECT('orderSn', 'FAR'), '6050-01-01 00:00:00', 'range:far')",
    );
    const shifted = await server!.request('POST', '/tasks/bulk/reschedule', {
      keyPrefix: 'range:',
      shiftMs: 10 * 365 * 86_400_000,
      requestId: 'far',
    });
    expect(shifted.body).toMatchObject({ matched: 1, changed: 0 });
    expect((await server!.request('GET', '/tasks/by-key/range:far')).body.runAt).toBe('6050-01-01T00:00:00.000Z');
  });
});

describe('failure notices (NOTIFY_URL)', () => {
  it('cannot be suppressed by a create that takes a notice’s key first: keys of punctual:notify: are refused, and the notice goes out', async () => {
    await start({
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
      NOTIFY_URL: `http://127.0.0.1:${receiverPort}/notify`,
    });
    const victim = await createTask({
      type: 'webhook',
      payload: { url: `http://127.0.0.1:${receiverPort}/error` },
      delayMs: 3_600_000,
      maxAttempts: 1,
    });
    // The notice of the victim's failure at its first attempt would have this key.
    const squat = { type: 'webhook', payload: { url: `http://127.0.0.1:${receiverPort}/squat` }, delayMs: 3_600_000 };
    const before = await taskCount();
    const single = await server!.request('POST', '/tasks', { ...squat, key: `punctual:notify:failed:${victim.id}:1` });
    expect(single.status, JSON.stringify(single.body)).toBe(400);
    expect(single.body.message).toMatch(/body\/key/);
    const batch = await server!.request('POST', '/tasks/batch', { tasks: [{ ...squat, key: 'punctual:notify:anything' }] });
    expect(batch.body.results[0].status).toBe(400);
    expect(await taskCount()).toBe(before);
    // The victim fails for good now: its notice is sent.
    expect((await server!.request('POST', `/tasks/${victim.id}/reschedule`, { delayMs: 0 })).status).toBe(200);
    const notice = await waitFor(async () => received.find((call) => call.path === '/notify'), 20_000, 'the failure notice');
    expect(JSON.parse(notice.body)).toMatchObject({ event: 'task.failed', task: { id: victim.id } });
    expect(received.map((call) => call.path)).not.toContain('/squat');
  });
});

describe('rows a shop inserts itself', () => {
  it('with a type named like a property of every object (__proto__, constructor) are counted in the charts and poison nothing', async () => {
    await start({ WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}` });
    // The documented enqueue: a plain INSERT in the shop's own transaction, any type text.
    await db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at) VALUES
        ('__proto__', '{}', UTC_TIMESTAMP(3) + INTERVAL 30 MINUTE),
        ('constructor', '{}', UTC_TIMESTAMP(3) + INTERVAL 40 MINUTE)`,
    );
    try {
      const charts = await server!.request('GET', '/charts/upcoming');
      expect(charts.status).toBe(200);
      for (const type of ['__proto__', 'constructor']) {
        expect(Object.hasOwn(charts.body.hours.byType, type), type).toBe(true);
        expect(
          charts.body.hours.byType[type].reduce((a: number, b: number) => a + b, 0),
          type,
        ).toBe(1);
      }
      // The process is whole: the routes whose answers walk objects still answer.
      for (const path of ['/types', '/metrics', '/tasks/summary', '/tasks?status=pending']) {
        const answer = await raw('GET', path);
        expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
      }
      const task = await createTask({ type: 'webhook', payload: { url: `http://127.0.0.1:${receiverPort}/after-charts` }, delayMs: 0 });
      await waitFor(
        async () => (await server!.request('GET', `/tasks/${task.id}`)).body.status === 'done',
        15_000,
        'a webhook after the charts',
      );
    } finally {
      await db.execute("DELETE FROM punctual_tasks WHERE type IN ('__proto__', 'constructor')");
    }
  });
});

/** The Node receiver snippet of docs/handlers.md, as a module. */
async function docsReceiver(): Promise<{ verifyPunctual: (call: Record<string, unknown>) => boolean }> {
  const readme = readFileSync(new URL('../../docs/handlers.md', import.meta.url), 'utf8');
  const code = /```js\n(\/\/ verify-punctual\.mjs[\s\S]*?)```/.exec(readme)?.[1];
  expect(code, 'docs/handlers.md has a Node receiver snippet').toBeDefined();
  const dir = mkdtempSync(join(tmpdir(), 'punctual-readme-'));
  try {
    const file = join(dir, 'verify-punctual.mjs');
    writeFileSync(file, code!);
    return await import(pathToFileURL(file).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
