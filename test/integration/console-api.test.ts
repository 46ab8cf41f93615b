/**
 * The API the operator's console stands on: GET /tasks (one status a page at a time by offset,
 * filtered by type, tag and key prefix, with its total), GET /tasks/counts, and the bulk changes
 * by a list of ids and the bulk retry. Bad input is a 400 that changes nothing; the roles are
 * those of the lists and of the bulk changes; the trail names the ids.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'console-admin-token-0123456789';
const READ = 'console-read-token-0123456789';
const WRITE = 'console-write-token-0123456789';
const as = (token: string) => ({ authorization: `Bearer ${token}` });
const HOUR = 3_600_000;

let db: TestDatabase;
let service: TestService;
let recovered = false;

const call = (method: string, url: string, body?: unknown, token = ADMIN) => service.call(method, url, body, as(token));

async function count(sql: string, values?: unknown[]): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

async function batch(tasks: unknown[]): Promise<number[]> {
  const { status, body } = await call('POST', '/tasks/batch', { tasks }, WRITE);
  expect(status).toBe(200);
  expect(body.refused).toBe(0);
  return body.results.map((r: { id: number }) => r.id);
}

/** `n` failed tasks with `tags`: flaky fails until `recovered`, with one attempt. */
async function failed(n: number, tags: string[]): Promise<number[]> {
  const ids = await batch(Array.from({ length: n }, (_, i) => ({ type: 'flaky', payload: { i }, delayMs: 0, maxAttempts: 1, tags })));
  await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'failed'", [ids])) === n);
  return ids;
}

beforeAll(async () => {
  db = await createTestDatabase('console_api');
  service = await startTestService(
    db,
    { API_TOKENS: `ops-alice:admin:${ADMIN},wallboard:read:${READ},shop:write:${WRITE}` },
    {
      handlers: [
        testHandler('flaky', async () => {
          if (!recovered) throw new Error('partner answered 503');
        }),
        testHandler('other', async () => {}),
      ],
    },
  );
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  recovered = false;
  await db.execute('DELETE FROM punctual_tasks');
  await db.execute('DELETE FROM punctual_audit_log');
});

describe('GET /tasks', () => {
  it('pages one status by offset with its total: 120 pending, 50 a page, the third page holds 20', async () => {
    const start = Date.now() + HOUR;
    const ids = await batch(
      Array.from({ length: 120 }, (_, i) => ({ type: 'flaky', payload: { i }, runAt: start + (119 - i) * 1000, tags: ['page:test'] })),
    );
    const first = await call('GET', '/tasks?status=pending&tag=page:test&limit=50', undefined, READ);
    expect(first.status).toBe(200);
    expect(first.body.total).toBe(120);
    expect(first.body.tasks).toHaveLength(50);
    expect(first.body.nextOffset).toBe(50);
    // Soonest first: the last created runs first.
    expect(first.body.tasks[0].id).toBe(ids[119]);
    const third = await call('GET', '/tasks?status=pending&tag=page:test&limit=50&offset=100', undefined, READ);
    expect(third.body.tasks).toHaveLength(20);
    expect(third.body.nextOffset).toBeNull();
    expect(third.body.offset).toBe(100);
    expect(third.body.tasks.at(-1).id).toBe(ids[0]);
    // The pages together are every task once.
    const second = await call('GET', '/tasks?status=pending&tag=page:test&limit=50&offset=50', undefined, READ);
    const seen = [...first.body.tasks, ...second.body.tasks, ...third.body.tasks].map((task: { id: number }) => task.id);
    expect(new Set(seen).size).toBe(120);
  });

  it('filters by status, type, tag and key prefix, finished ones newest first, and counts each status', async () => {
    const [a, b] = await batch([
      { type: 'other', payload: {}, delayMs: HOUR, key: 'shop:1:a', tags: ['merchant:1'] },
      { type: 'other', payload: {}, delayMs: HOUR, key: 'shop:2:b', tags: ['merchant:2'] },
      { type: 'flaky', payload: {}, delayMs: HOUR, key: 'shop:1:c', tags: ['merchant:1'] },
    ]);
    expect((await call('POST', `/tasks/${a}/cancel`)).status).toBe(200);
    expect((await call('POST', `/tasks/${b}/cancel`)).status).toBe(200);
    const fails = await failed(2, ['merchant:1']);

    const cancelled = await call('GET', '/tasks?status=cancelled', undefined, READ);
    expect(cancelled.body.tasks.map((task: { id: number }) => task.id)).toEqual([b, a]);
    const byTag = await call('GET', '/tasks?status=failed&tag=merchant:1', undefined, READ);
    expect(byTag.body.tasks.map((task: { id: number }) => task.id).sort()).toEqual([...fails].sort());
    const byType = await call('GET', '/tasks?status=pending&type=flaky', undefined, READ);
    expect(byType.body.tasks.map((task: { key: string }) => task.key)).toEqual(['shop:1:c']);
    const byKey = await call('GET', '/tasks?status=cancelled&keyPrefix=shop:1:', undefined, READ);
    expect(byKey.body.tasks.map((task: { id: number }) => task.id)).toEqual([a]);

    const counts = await call('GET', '/tasks/counts?tag=merchant:1', undefined, READ);
    expect(counts.status).toBe(200);
    expect(counts.body.counts).toEqual({ pending: 1, running: 0, done: 0, failed: 2, cancelled: 1, skipped: 0 });
  });

  it('answers 400 to a bad status, limit or offset, and masks header values for a read token', async () => {
    for (const query of ['status=lost', 'limit=0', 'limit=201', 'offset=-1', 'offset=10001', 'tag=bad%20tag', 'color=red']) {
      const answer = await call('GET', `/tasks?${query}`, undefined, READ);
      expect(answer.status, query).toBe(400);
      expect(answer.body.message).toMatch(/querystring/);
    }
    expect((await call('GET', '/tasks/counts?status=pending', undefined, READ)).status).toBe(400);
    expect((await service.call('GET', '/tasks')).status).toBe(401);
    await batch([{ type: 'other', payload: { headers: { 'x-shop-sig': 'secret-value' } }, delayMs: HOUR }]);
    const read = await call('GET', '/tasks', undefined, READ);
    expect(read.body.tasks[0].payload.headers).toEqual({ 'x-shop-sig': '***' });
    const write = await call('GET', '/tasks', undefined, WRITE);
    expect(write.body.tasks[0].payload.headers).toEqual({ 'x-shop-sig': 'secret-value' });
  });
});

describe('bulk changes of a selection', () => {
  it('cancels exactly the pending tasks among the ids, and the trail names them', async () => {
    const ids = await batch(Array.from({ length: 6 }, (_, i) => ({ type: 'other', payload: { i }, delayMs: HOUR })));
    const [done] = await batch([{ type: 'other', payload: {}, delayMs: 0 }]);
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [done])) === 1);
    const chosen = [ids[1]!, ids[3]!, ids[4]!, done!];

    expect((await call('POST', '/tasks/bulk/cancel', { ids: chosen }, WRITE)).status).toBe(403);
    const answer = await call('POST', '/tasks/bulk/cancel', { ids: chosen });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ matched: 3, changed: 3 });
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'")).toBe(3);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled' AND id IN (?)", [chosen])).toBe(3);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [done])).toBe(1);

    const trail = await call('GET', '/audit?action=bulk-cancel');
    expect(trail.body.entries).toHaveLength(1);
    expect(trail.body.entries[0]).toMatchObject({ actor: 'ops-alice', target: `ids:${chosen.join(',')}`, status: 200 });
  });

  it('refuses a bad selection with a 400 and changes nothing', async () => {
    const ids = await batch(Array.from({ length: 3 }, (_, i) => ({ type: 'other', payload: { i }, delayMs: HOUR, tags: ['t:1'] })));
    const bad = [
      { ids: [] },
      { ids: [ids[0], ids[0]] },
      { ids: [0] },
      { ids: ids, tag: 't:1' },
      { ids: Array.from({ length: 1001 }, (_, i) => i + 1) },
      { ids: ['1'] },
    ];
    for (const body of bad) expect((await call('POST', '/tasks/bulk/cancel', body)).status, JSON.stringify(body).slice(0, 60)).toBe(400);
    expect((await call('POST', '/tasks/bulk/retry', {})).status).toBe(400);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending'")).toBe(3);
    expect((await call('GET', '/audit')).body.entries).toHaveLength(0);
  });

  it('retries every failed task with a tag, now, and leaves the others failed', async () => {
    const tagged = await failed(3, ['sale:9']);
    const others = await failed(2, ['sale:10']);
    recovered = true;
    expect((await call('POST', '/tasks/bulk/retry', { tag: 'sale:9' }, WRITE)).status).toBe(403);
    const answer = await call('POST', '/tasks/bulk/retry', { tag: 'sale:9' });
    expect(answer.body).toEqual({ matched: 3, changed: 3 });
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [tagged])) === 3);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'failed'", [others])).toBe(2);
    // A repeat finds nothing failed.
    expect((await call('POST', '/tasks/bulk/retry', { tag: 'sale:9' })).body).toEqual({ matched: 0, changed: 0 });
    const byIds = await call('POST', '/tasks/bulk/retry', { ids: [others[0]] });
    expect(byIds.body).toEqual({ matched: 1, changed: 1 });
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [others[0]])) === 1);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'failed'", [others[1]])).toBe(1);
    const trail = await call('GET', '/audit?action=bulk-retry');
    expect(trail.body.entries.map((entry: { target: string }) => entry.target)).toEqual([`ids:${others[0]}`, 'tag:sale:9', 'tag:sale:9']);
  });
});
