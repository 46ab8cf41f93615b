/**
 * A receiver that answers 429 or 503 with Retry-After: the next attempt comes no sooner than it
 * asked (seconds or an HTTP date), capped by RETRY_MAX_MS; without the header, punctual's own
 * backoff applies.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/server.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('retry_after');
let receiver: Server;
let base: string;
/** Calls by path: when each came. */
const calls = new Map<string, number[]>();
/** How the receiver answers the first call of a path; later calls get 200. */
const first = new Map<string, (res: ServerResponse) => void>();

beforeAll(async () => {
  receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '/';
      const seen = calls.get(path) ?? [];
      seen.push(Date.now());
      calls.set(path, seen);
      const answer = seen.length === 1 ? first.get(path) : undefined;
      if (answer === undefined) res.writeHead(200).end('ok');
      else answer(res);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});

async function start(env: Record<string, string> = {}) {
  fixture.service = await fixture.start({
    WEBHOOK_SECRET: 'whsec-retry-after',
    WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    RETRY_BASE_MS: '100',
    ...env,
  });
  return fixture.service;
}

/** Creates a webhook to `path`, waits until it is done, answers the gap between its first two calls. */
async function gapBetweenCalls(path: string): Promise<{ gapMs: number; task: Record<string, unknown> }> {
  const created = await fixture.service!.call('POST', '/tasks', { type: 'webhook', payload: { url: `${base}${path}` }, delayMs: 0 });
  expect(created.status).toBe(201);
  const task = await waitFor(
    async () => {
      const t = (await fixture.service!.call('GET', `/tasks/${created.body.id}`)).body;
      return t.status === 'done' || t.status === 'failed' ? t : undefined;
    },
    15_000,
    `task ${created.body.id} to settle`,
  );
  const seen = calls.get(path)!;
  expect(seen).toHaveLength(2);
  return { gapMs: seen[1]! - seen[0]!, task };
}

describe('Retry-After', () => {
  it('a 429 with Retry-After in seconds: the next attempt waits that long, not the backoff', async () => {
    await start();
    first.set('/seconds', (res) => res.writeHead(429, { 'retry-after': '2' }).end('slow down'));
    const { gapMs, task } = await gapBetweenCalls('/seconds');
    expect(task).toMatchObject({ status: 'done', attempts: 2 });
    expect(gapMs).toBeGreaterThanOrEqual(2_000);
    expect(gapMs).toBeLessThan(4_000);
  });

  it('a 503 with Retry-After as an HTTP date: the next attempt waits until then', async () => {
    await start();
    first.set('/date', (res) => {
      // Whole seconds: an HTTP date has no milliseconds, so 3 s ahead rounded up is 2 to 3 s away.
      const at = new Date(Math.ceil((Date.now() + 2_000) / 1000) * 1000 + 1000);
      res.writeHead(503, { 'retry-after': at.toUTCString() }).end('maintenance');
    });
    const { gapMs, task } = await gapBetweenCalls('/date');
    expect(task).toMatchObject({ status: 'done', attempts: 2 });
    expect(gapMs).toBeGreaterThanOrEqual(2_000);
    expect(gapMs).toBeLessThan(5_000);
  });

  it('a Retry-After past RETRY_MAX_MS waits RETRY_MAX_MS, and lastError says what was asked', async () => {
    await start({ RETRY_MAX_MS: '1500' });
    first.set('/long', (res) => res.writeHead(429, { 'retry-after': '3600' }).end('come back in an hour'));
    const created = await fixture.service!.call('POST', '/tasks', { type: 'webhook', payload: { url: `${base}/long` }, delayMs: 0 });
    const failedOnce = await waitFor(
      async () => {
        const t = (await fixture.service!.call('GET', `/tasks/${created.body.id}`)).body;
        return t.attempts === 1 && t.status === 'pending' ? t : undefined;
      },
      10_000,
      'the first attempt to fail',
    );
    expect(failedOnce.lastError).toMatch(/answered 429.*Retry-After 3600 s/);
    expect(failedOnce.lastHttpStatus).toBe(429);
    await waitFor(
      async () => ((await fixture.service!.call('GET', `/tasks/${created.body.id}`)).body.status === 'done' ? true : undefined),
      10_000,
      'done',
    );
    const seen = calls.get('/long')!;
    expect(seen[1]! - seen[0]!).toBeGreaterThanOrEqual(1_400);
    expect(seen[1]! - seen[0]!).toBeLessThan(3_000);
  });

  it('a 429 without Retry-After, or a 500 with one, follows the backoff', async () => {
    await start();
    first.set('/plain', (res) => res.writeHead(429).end('slow down'));
    first.set('/other', (res) => res.writeHead(500, { 'retry-after': '30' }).end('broke'));
    for (const path of ['/plain', '/other']) {
      const { gapMs } = await gapBetweenCalls(path);
      expect(gapMs, path).toBeLessThan(1_000);
    }
  });
});
