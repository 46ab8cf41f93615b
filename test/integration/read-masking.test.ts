/**
 * A read token (the dashboard's, a monitor's) sees which headers a webhook sends, not their
 * values: they are the shop's credentials for its receivers. write and admin see them whole.
 * Checked on every route that shows a task, and on every read route for a leak anywhere else.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../../src/contract/auth.js';
import { ROUTE_ROLES } from '../../src/http/roles.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKENS: Record<Exclude<Role, 'worker'>, string> = {
  read: 'read-token-0123456789abcdef',
  write: 'write-token-0123456789abcdef',
  admin: 'admin-token-0123456789abcdef',
};
const bearer = (role: keyof typeof TOKENS) => ({ authorization: `Bearer ${TOKENS[role]}` });

/** Values no read answer may carry. */
const HEADERS = {
  Authorization: 'Bearer shop-secret-1',
  'X-Api-Key': 'shop-secret-2',
  Cookie: 'session=shop-secret-3',
  'X-Shop-Id': 'shop-secret-4',
};
const SECRETS = Object.values(HEADERS);
const MASKED = Object.fromEntries(Object.keys(HEADERS).map((name) => [name, '***']));

let db: TestDatabase;
let service: TestService;
const ids: Record<'pending' | 'done' | 'failed', number> = { pending: 0, done: 0, failed: 0 };

function payload(path: string) {
  return { url: `https://hooks.example.com/${path}`, headers: HEADERS, body: { orderSn: 'SN1' } };
}

beforeAll(async () => {
  db = await createTestDatabase('read_masking');
  service = await startTestService(db, {
    API_TOKENS_READ: TOKENS.read,
    API_TOKENS_WRITE: TOKENS.write,
    API_TOKENS_ADMIN: TOKENS.admin,
    WEBHOOK_SECRET: 'whsec-test-secret',
    WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com',
  });
  const created = await service.call(
    'POST',
    '/tasks',
    { type: 'webhook', payload: payload('pending'), delayMs: 3_600_000, key: 'hook:pending', tags: ['merchant:42'] },
    bearer('write'),
  );
  expect(created.status).toBe(201);
  ids.pending = created.body.id;
  // Finished tasks, as runs leave them (their calls would need a receiver on the internet).
  for (const status of ['done', 'failed'] as const) {
    const [result] = await db.pool.query<import('mysql2').ResultSetHeader>(
      `INSERT INTO punctual_tasks (task_key, type, payload, run_at, status, attempts, finished_at)
       VALUES (?, 'webhook', ?, UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, ?, 1, UTC_TIMESTAMP(3))`,
      [`hook:${status}`, JSON.stringify(payload(status)), status],
    );
    ids[status] = result.insertId;
  }
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

/** Every read route that shows tasks, with the tasks it shows. */
function taskRoutes(): [string, (body: any) => any[]][] {
  const one = (body: any) => [body];
  const list = (body: any) => body.tasks as any[];
  return [
    [`/tasks/${ids.pending}`, one],
    [`/tasks/${ids.done}`, one],
    ['/tasks/by-key/hook%3Apending', one],
    ['/tasks/by-key/hook%3Afailed', one],
    ['/tasks/pending', list],
    ['/tasks/pending?limit=50', list], // the dashboard's
    ['/tasks/pending?tag=merchant%3A42', list],
    ['/tasks/pending?keyPrefix=hook%3A', list],
    ['/tasks/pending?type=webhook', list],
    ['/tasks/recent', list],
    ['/tasks/recent?status=done&limit=30', list], // the dashboard's
    ['/tasks/recent?status=failed&limit=30', list], // the dashboard's
  ];
}

describe('payload headers', () => {
  it('show a read token their names with the values masked, on every route that shows a task', async () => {
    for (const [url, tasks] of taskRoutes()) {
      const answer = await service.call('GET', url, undefined, bearer('read'));
      expect(answer.status, url).toBe(200);
      const shown = tasks(answer.body);
      expect(shown.length, url).toBeGreaterThan(0);
      for (const task of shown) {
        expect(task.payload, url).toEqual({ ...payload(task.key.split(':')[1]), headers: MASKED });
      }
      for (const secret of SECRETS) expect(JSON.stringify(answer.body), url).not.toContain(secret);
    }
  });

  it('show write and admin tokens the real values on the same routes', async () => {
    for (const role of ['write', 'admin'] as const) {
      for (const [url, tasks] of taskRoutes()) {
        const answer = await service.call('GET', url, undefined, bearer(role));
        expect(answer.status, `${role} ${url}`).toBe(200);
        for (const task of tasks(answer.body)) expect(task.payload.headers, `${role} ${url}`).toEqual(HEADERS);
      }
    }
  });

  it('reach a read token through no read route at all', async () => {
    // GET /events is a stream that never ends, and carries no payload (src/store/sql/events.ts
    // selects none); events.test.ts reads it over a socket.
    const readRoutes = Object.entries(ROUTE_ROLES).filter(
      // GET /test/clock answers 404 unless the service runs on the test clock (test-clock.test.ts).
      ([route, role]) => role === 'read' && route.startsWith('GET ') && route !== 'GET /events' && !route.startsWith('GET /test/'),
    );
    expect(readRoutes.length).toBeGreaterThanOrEqual(8);
    for (const [route] of readRoutes) {
      // A route that needs a question is asked one that finds the task with the secrets.
      const question = route === 'GET /tasks/search' ? `?q=${encodeURIComponent('hook:pending')}` : '';
      const url = `${route.slice('GET '.length).replace(':id', String(ids.pending)).replace(':key', encodeURIComponent('hook:pending'))}${question}`;
      const answer = await service.app.inject({ url, headers: bearer('read') });
      expect(answer.statusCode, route).toBe(200);
      for (const secret of SECRETS) expect(answer.body, route).not.toContain(secret);
    }
  });

  it('are stored whole: masking is in what a read token is shown, not in what is sent', async () => {
    const [row] = await db.query<any[]>('SELECT payload FROM punctual_tasks WHERE id = ?', [ids.pending]);
    const stored = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
    expect(stored.headers).toEqual(HEADERS);
  });
});
