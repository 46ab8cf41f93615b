/**
 * What the console's forms show beside their fields: refusals that name the limit broken, and the
 * Failed view's retry and delete of every failed task, with no filter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'refusals-admin-token-0123456789';

let db: TestDatabase;
let service: TestService;

const call = (method: string, url: string, body?: unknown) => service.call(method, url, body, { authorization: `Bearer ${TOKEN}` });

async function count(sql: string): Promise<number> {
  return Number((await db.query<any[]>(sql))[0].n);
}

beforeAll(async () => {
  db = await createTestDatabase('refusals');
  service = await startTestService(db, { API_TOKEN: TOKEN }, { handlers: [testHandler('quiet', async () => {})] });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('a refusal names the limit', () => {
  it('of a type limit out of its range, and changes nothing', async () => {
    const { status, body } = await call('PUT', '/types/quiet/limits', { maxConcurrency: 1e9 });
    expect(status).toBe(400);
    expect(body.message).toBe('body/maxConcurrency must be <= 10000, or null');
    expect((await call('GET', '/types')).body.types.find((t: any) => t.type === 'quiet').maxConcurrency).toBeNull();
  });

  it('of a body over the size limit', async () => {
    const { status, body } = await call('PUT', '/tasks/1/payload', { payload: { note: 'x'.repeat(1024 * 1024) } });
    expect(status).toBe(413);
    expect(body.message).toBe('the request body is larger than the limit of 131072 bytes (128 KiB)');
  });
});

describe('every failed task', () => {
  it('is retried by all: true, and deleted by all: true, counted', async () => {
    await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, status, finished_at) VALUES ('quiet', '{}', UTC_TIMESTAMP(3) + INTERVAL 1 DAY, 'failed', UTC_TIMESTAMP(3)), ('other', '{}', UTC_TIMESTAMP(3) + INTERVAL 1 DAY, 'failed', UTC_TIMESTAMP(3)), ('quiet', '{}', UTC_TIMESTAMP(3) + INTERVAL 1 DAY, 'pending', NULL)",
    );
    const retried = await call('POST', '/tasks/bulk/retry', { all: true });
    expect(retried.body).toEqual({ matched: 2, changed: 2 });
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'failed'")).toBe(0);
    await db.execute(
      "UPDATE punctual_tasks SET status = 'failed', finished_at = UTC_TIMESTAMP(3), run_at = UTC_TIMESTAMP(3) + INTERVAL 1 DAY WHERE type = 'other'",
    );
    const deleted = await call('POST', '/tasks/bulk/delete', { status: 'failed', all: true });
    expect(deleted.body).toEqual({ matched: 1, changed: 1 });
    expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks')).toBe(2);
    // all with another selector, or on a cancel, is refused.
    expect((await call('POST', '/tasks/bulk/retry', { all: true, type: 'quiet' })).status).toBe(400);
    expect((await call('POST', '/tasks/bulk/cancel', { all: true })).status).toBe(400);
  });
});

describe('a stuck lease', () => {
  it('shows its holder and end, and an admin releases it once it ran out, on the audit trail', async () => {
    const inserted = await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, lease_owner, lease_until) VALUES ('quiet', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 HOUR, 'running', 1, 'host-a:4242', UTC_TIMESTAMP(3) + INTERVAL 1 HOUR), ('quiet', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 HOUR, 'running', 1, 'pull:secret-lease-token', UTC_TIMESTAMP(3) - INTERVAL 10 MINUTE)",
    );
    const [held, stuck] = [inserted.insertId, inserted.insertId + 1];
    const shown = (await call('GET', `/tasks/${held}`)).body;
    expect(shown.leaseHolder).toBe('host-a:4242');
    expect(Date.parse(shown.leaseUntil)).toBeGreaterThan(Date.now());
    const pulled = (await call('GET', `/tasks/${stuck}`)).body;
    // A pull lease's token is what ack names: never shown, a digest of it is.
    expect(pulled.leaseHolder).toMatch(/^pull:[0-9a-f]{12}$/);
    expect(JSON.stringify(pulled)).not.toContain('secret-lease-token');

    const refused = await call('POST', `/tasks/${held}/release-lease`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toBe(`task ${held} holds no stuck lease: its lease has not run out`);
    expect((await call('GET', `/tasks/${held}`)).body.status).toBe('running');

    const released = await call('POST', `/tasks/${stuck}/release-lease`);
    expect(released.status).toBe(200);
    expect(['pending', 'running', 'done']).toContain(released.body.status);
    const trail = (await call('GET', '/audit?action=release-lease')).body.entries;
    expect(trail.map((entry: any) => entry.target)).toContain(`task:${stuck}`);
    await db.execute('DELETE FROM punctual_tasks WHERE id IN (?)', [[held, stuck]]);
  });
});

describe('the audit trail', () => {
  it('says run-now for a reschedule to now, reschedule for another time', async () => {
    const created = (await call('POST', '/tasks', { type: 'quiet', payload: {}, delayMs: 3_600_000 })).body;
    expect((await call('POST', `/tasks/${created.id}/reschedule`, { delayMs: 7_200_000 })).status).toBe(200);
    expect((await call('POST', `/tasks/${created.id}/reschedule`, { delayMs: 0 })).status).toBe(200);
    const rows = await db.query<any[]>('SELECT action FROM punctual_audit_log WHERE target = ? ORDER BY id', [`task:${created.id}`]);
    expect(rows.map((row) => row.action)).toEqual(['reschedule', 'run-now']);
  });

  it('serves an icon at /favicon.ico', async () => {
    const icon = await service.app.inject({ url: '/favicon.ico' });
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['content-type']).toContain('image/svg+xml');
  });
});
