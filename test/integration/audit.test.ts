/**
 * Named tokens and the audit trail against MariaDB: every change through the API is on record with
 * the token's name, the request id, what and when; refused input and refused tokens leave nothing;
 * GET /audit is admin-only, paged and filtered; old entries go under retention.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { ROUTE_ROLES } from '../../src/http/roles.js';
import { AUDITED, NOT_AUDITED } from '../../src/http/audit.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ALICE = 'alice-admin-token-0123456789';
const SHOP = 'shop-write-token-0123456789';
const VIEWER = 'viewer-read-token-0123456789';
const ENV = { API_TOKENS: `ops-alice:admin:${ALICE},shop:write:${SHOP},dashboard:read:${VIEWER}` };

let db: TestDatabase;
let service: TestService | undefined;

const as = (token: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...extra });

async function entries(query = ''): Promise<any[]> {
  const answer = await service!.call('GET', `/audit${query}`, undefined, as(ALICE));
  expect(answer.status).toBe(200);
  return answer.body.entries;
}

async function create(key: string, tags: string[] = []): Promise<number> {
  const answer = await service!.call(
    'POST',
    '/tasks',
    { type: 'close_order', payload: { orderSn: key }, delayMs: 3_600_000, key, tags },
    as(SHOP),
  );
  expect(answer.status).toBe(201);
  return answer.body.id as number;
}

beforeAll(async () => {
  db = await createTestDatabase('audit');
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  await db.execute('DELETE FROM punctual_audit_log').catch(() => undefined);
});

afterAll(async () => {
  await db?.drop();
});

describe('named tokens', () => {
  it('GET /auth/whoami tells the token its name and role', async () => {
    service = await startTestService(db, ENV);
    expect((await service.call('GET', '/auth/whoami', undefined, as(VIEWER))).body).toEqual({ role: 'read', name: 'dashboard' });
    expect((await service.call('GET', '/auth/whoami', undefined, as(ALICE))).body).toEqual({ role: 'admin', name: 'ops-alice' });
  });

  it('names the unnamed tokens by where they come from', async () => {
    service = await startTestService(db, {
      API_TOKEN: 'the-full-token-0123456789',
      API_TOKENS_READ: 'first-read-token-0123,second-read-token-012',
    });
    expect((await service.call('GET', '/auth/whoami', undefined, as('the-full-token-0123456789'))).body.name).toBe('API_TOKEN');
    expect((await service.call('GET', '/auth/whoami', undefined, as('second-read-token-012'))).body.name).toBe('read-2');
  });

  it('refuses a bad API_TOKENS entry with one line that names the entry, never the token', () => {
    const read = (value: string) => () => loadConfig({ API_TOKENS: value });
    expect(read('alice:root:abcdefghijklmnopqrstu')).toThrow(/API_TOKENS entry 1 must be name:role:token/);
    expect(read(`a:read:${'x'.repeat(20)},b:read:short`)).toThrow(/API_TOKENS entry 2/);
    expect(read(`a:read:${'x'.repeat(20)},b:read:short`)).not.toThrow(/short/);
    expect(read(`a:read:${'x'.repeat(20)},a:admin:${'y'.repeat(20)}`)).toThrow(/the name a is given twice/);
    expect(() => loadConfig({ API_TOKENS: `a:read:${'x'.repeat(20)}`, API_TOKENS_ADMIN: 'x'.repeat(20) })).toThrow(
      /each token may appear once/,
    );
  });
});

describe('the audit trail', () => {
  it('records who cancelled, rescheduled and retried what, with the request id', async () => {
    service = await startTestService(db, ENV);
    const id = await create('audit:1');
    const moved = await service.call(
      'POST',
      `/tasks/${id}/reschedule`,
      { delayMs: 7_200_000 },
      as(SHOP, { 'x-request-id': 'shop-req-42' }),
    );
    expect(moved.status).toBe(200);
    const cancelled = await service.call('POST', `/tasks/${id}/cancel`, undefined, as(ALICE));
    expect(cancelled.status).toBe(200);
    // Refused: the task is not pending any more. On record, as refused.
    expect((await service.call('POST', `/tasks/${id}/reschedule`, { delayMs: 1000 }, as(SHOP))).status).toBe(409);
    // Bad input and a refused token change nothing: not on record.
    expect((await service.call('POST', `/tasks/${id}/reschedule`, { delayMs: -1 }, as(SHOP))).status).toBe(400);
    expect((await service.call('POST', `/tasks/${id}/cancel`, undefined, as(VIEWER))).status).toBe(403);
    expect((await service.call('POST', `/tasks/${id}/cancel`, undefined, as('not-a-token-at-all-000'))).status).toBe(401);

    const trail = await entries();
    expect(trail.map((e) => [e.actor, e.action, e.target, e.status])).toEqual([
      ['shop', 'reschedule', `task:${id}`, 409],
      ['ops-alice', 'cancel', `task:${id}`, 200],
      ['shop', 'reschedule', `task:${id}`, 200],
    ]);
    const first = trail[2];
    expect(first.requestId).toBe('shop-req-42');
    expect(first.role).toBe('write');
    expect(first.detail).toMatchObject({ request: { delayMs: 7_200_000 }, result: { taskId: id, status: 'pending' } });
    expect(trail[1].detail.result).toMatchObject({ taskId: id, status: 'cancelled' });
    // A request id punctual gave: unique, not the client's.
    expect(trail[1].requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Math.abs(Date.parse(trail[0].at) - Date.now())).toBeLessThan(60_000);
    // Counted as effects: one row per change, nothing for the refused requests.
    const [count] = await db.query<any>('SELECT COUNT(*) AS n FROM punctual_audit_log');
    expect(Number(count.n)).toBe(3);
  });

  it('records bulk changes with their counts, and pauses, resumes and limits', async () => {
    service = await startTestService(db, ENV);
    await create('audit:bulk:1', ['sale-9']);
    await create('audit:bulk:2', ['sale-9']);
    const bulk = await service.call('POST', '/tasks/bulk/cancel', { tag: 'sale-9' }, as(ALICE));
    expect(bulk.status).toBe(200);
    expect((await service.call('POST', '/types/close_order/pause', undefined, as(ALICE))).status).toBe(200);
    expect((await service.call('PUT', '/types/close_order/limits', { maxConcurrency: 3 }, as(ALICE))).status).toBe(200);
    expect((await service.call('POST', '/types/close_order/resume', undefined, as(ALICE))).status).toBe(200);
    const trail = await entries();
    expect(trail.map((e) => [e.action, e.target])).toEqual([
      ['resume', 'type:close_order'],
      ['limits', 'type:close_order'],
      ['pause', 'type:close_order'],
      ['bulk-cancel', 'tag:sale-9'],
    ]);
    expect(trail[3].detail.result).toEqual({ matched: 2, changed: 2 });
    expect(trail[1].detail.request).toEqual({ maxConcurrency: 3 });
  });

  it('records a create that replaced a task (onKeyConflict: replace), alone and in a batch, with the new content; a plain create or repeat is not', async () => {
    service = await startTestService(db, ENV);
    const id = await create('audit:replace:1');
    const other = await create('audit:replace:2');
    const far = Date.now() + 10 * 365 * 24 * 3600 * 1000 - 86_400_000;
    const replaced = await service.call(
      'POST',
      '/tasks',
      { type: 'close_order', payload: { orderSn: 'CHANGED' }, runAt: far, key: 'audit:replace:1', onKeyConflict: 'replace' },
      as(SHOP, { 'x-request-id': 'replace-req-1' }),
    );
    expect(replaced.status).toBe(200);
    // The same content again changes nothing: not a replace.
    const repeat = await service.call(
      'POST',
      '/tasks',
      { type: 'close_order', payload: { orderSn: 'CHANGED' }, runAt: far, key: 'audit:replace:1', onKeyConflict: 'replace' },
      as(SHOP),
    );
    expect(repeat.status).toBe(200);
    const batch = await service.call(
      'POST',
      '/tasks/batch',
      {
        tasks: [
          { type: 'close_order', payload: { orderSn: 'B2' }, delayMs: 60_000, key: 'audit:replace:2', onKeyConflict: 'replace' },
          { type: 'close_order', payload: { orderSn: 'NEW' }, delayMs: 60_000, key: 'audit:replace:3' },
        ],
      },
      as(SHOP),
    );
    expect(batch.body.results.map((r: { status: number }) => r.status)).toEqual([200, 201]);
    const trail = await entries('?action=replace');
    expect(trail.map((e) => [e.actor, e.target])).toEqual([
      ['shop', `task:${other}`],
      ['shop', `task:${id}`],
    ]);
    expect(trail[1]).toMatchObject({ requestId: 'replace-req-1', status: 200 });
    expect(trail[1].detail.request).toMatchObject({ payload: { orderSn: 'CHANGED' }, onKeyConflict: 'replace' });
    expect(trail[1].detail.result).toMatchObject({ taskId: id, status: 'pending', runAt: new Date(far).toISOString() });
    expect(trail[0].detail.request).toEqual({ replaced: [other] });
    // Nothing else of the creates is on record.
    expect((await entries()).every((e) => e.action === 'replace')).toBe(true);
  });

  it('is admin-only, paged and filtered', async () => {
    service = await startTestService(db, ENV);
    const ids = [await create('audit:p:1'), await create('audit:p:2'), await create('audit:p:3')];
    for (const id of ids) expect((await service.call('POST', `/tasks/${id}/cancel`, undefined, as(SHOP))).status).toBe(200);
    expect((await service.call('POST', '/types/close_order/pause', undefined, as(ALICE))).status).toBe(200);

    expect((await service.call('GET', '/audit', undefined, as(SHOP))).status).toBe(403);
    expect((await service.call('GET', '/audit', undefined, as(VIEWER))).status).toBe(403);

    expect((await entries('?actor=shop')).map((e) => e.target)).toEqual(ids.map((id) => `task:${id}`).reverse());
    expect((await entries('?action=pause')).map((e) => e.actor)).toEqual(['ops-alice']);
    expect((await entries(`?target=task:${ids[1]}`)).map((e) => e.action)).toEqual(['cancel']);
    expect(await entries('?since=2999-01-01T00:00:00Z')).toEqual([]);
    expect((await entries('?until=2999-01-01T00:00:00%2B08:00')).length).toBe(4);

    const first = await service.call('GET', '/audit?limit=3', undefined, as(ALICE));
    expect(first.body.entries).toHaveLength(3);
    const rest = await service.call('GET', `/audit?limit=3&cursor=${first.body.nextCursor}`, undefined, as(ALICE));
    expect(rest.body.entries.map((e: any) => e.target)).toEqual([`task:${ids[0]}`]);
    expect(rest.body.nextCursor).toBeNull();

    for (const bad of ['?since=yesterday', '?since=2026-12-01%2010:00:00', '?action=destroy', '?limit=0', '?cursor=x']) {
      expect((await service.call('GET', `/audit${bad}`, undefined, as(ALICE))).status).toBe(400);
    }
  });

  it('keeps entries for AUDIT_RETENTION_MS', async () => {
    service = await startTestService(db, { ...ENV, AUDIT_RETENTION_MS: String(24 * 3600_000) });
    const id = await create('audit:r:1');
    expect((await service.call('POST', `/tasks/${id}/cancel`, undefined, as(SHOP))).status).toBe(200);
    await db.execute(
      "INSERT INTO punctual_audit_log (at, actor, role, request_id, action, target, status) VALUES (UTC_TIMESTAMP(3) - INTERVAL 2 DAY, 'old', 'admin', 'r', 'pause', 'type:x', 200)",
    );
    expect((await service.retention.sweep()).audit).toBe(1);
    expect((await entries()).map((e) => e.actor)).toEqual(['shop']);
  });

  it('covers every route that changes something, but the creates', () => {
    const changes = Object.keys(ROUTE_ROLES).filter((route) => !route.startsWith('GET '));
    expect(changes.filter((route) => !(route in AUDITED) && !NOT_AUDITED.has(route))).toEqual([]);
  });
});
