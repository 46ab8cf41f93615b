/**
 * Scoped tokens over HTTP: each role may call its routes and gets a 403 naming the role needed
 * everywhere above it; no token or an unknown one is a 401; a refused call changes nothing.
 */
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/app/config.js';
import { installAuth } from '../../src/http/auth.js';
import { ROLES, type Role } from '../../src/contract/auth.js';
import { allows, ROUTE_ROLES, TokenRoles } from '../../src/http/roles.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const FULL = 'full-token-0123456789abcdef';
const TOKENS: Record<Role, string> = {
  read: 'read-token-0123456789abcdef',
  write: 'write-token-0123456789abcdef',
  admin: 'admin-token-0123456789abcdef',
  worker: 'worker-token-0123456789abcdef',
};
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

let db: TestDatabase;
let service: TestService;

async function rows(): Promise<{ n: number; changed: string }> {
  const [row] = await db.query<any[]>(
    'SELECT COUNT(*) AS n, CONCAT(MAX(updated_at), GROUP_CONCAT(status ORDER BY id)) AS changed FROM punctual_tasks',
  );
  return { n: Number(row.n), changed: String(row.changed) };
}

/** A concrete request for a route of the table, on the task `id` with key `key`. */
function request(route: string, id: number, key: string): [string, string, unknown] {
  const [method, pattern] = route.split(' ') as [string, string];
  const path = pattern.replace(':id', String(id)).replace(':key', encodeURIComponent(key)).replace(':type', 'close_order');
  const url = pattern === '/tasks/search' ? `${path}?q=k:1` : path;
  const body =
    method === 'PUT'
      ? pattern.endsWith('/payload')
        ? { payload: { orderSn: 'SN-EDITED' } }
        : { maxConcurrency: 8 }
      : method !== 'POST'
        ? undefined
        : pattern === '/tasks'
          ? { type: 'close_order', payload: { orderSn: 'SN-NEW' }, delayMs: 3_600_000 }
          : pattern === '/tasks/batch'
            ? { tasks: [{ type: 'close_order', payload: { orderSn: 'SN-NEW' }, delayMs: 3_600_000 }] }
            : pattern === '/test/clock'
              ? { advanceMs: 0 }
              : pattern === '/workers/lease'
                ? { types: ['reset_membership'] }
                : pattern === '/workers/ack'
                  ? { acks: [{ id, leaseToken: 'pull:not-a-lease' }] }
                  : pattern.endsWith('/ack')
                    ? { leaseToken: 'pull:not-a-lease' }
                    : pattern.endsWith('/nack')
                      ? { leaseToken: 'pull:not-a-lease', error: 'no' }
                      : pattern.endsWith('/extend')
                        ? { leaseToken: 'pull:not-a-lease', leaseMs: 5000 }
                        : pattern === '/tasks/bulk/cancel' || pattern === '/tasks/bulk/retry'
                          ? { tag: 'none:1' }
                          : pattern === '/tasks/bulk/delete'
                            ? { tag: 'none:1', status: 'failed' }
                            : pattern === '/tasks/bulk/reschedule'
                              ? { tag: 'none:1', shiftMs: 1000, requestId: 'r1' }
                              : pattern.endsWith('/reschedule')
                                ? { delayMs: 7_200_000 }
                                : {};
  return [method, url, body];
}

beforeAll(async () => {
  db = await createTestDatabase('roles');
  service = await startTestService(db, {
    API_TOKEN: FULL,
    API_TOKENS_READ: `${TOKENS.read}, another-read-token-0123`,
    API_TOKENS_WRITE: TOKENS.write,
    API_TOKENS_ADMIN: TOKENS.admin,
    API_TOKENS_WORKER: TOKENS.worker,
    WORKER_TYPES: 'reset_membership',
    // Its routes answer 404 without it: on, each role's call of them is tried too.
    TEST_CLOCK: 'on',
    // Every route is tried without a token: more refusals than the per-address limit allows.
    AUTH_FAILURES_PER_MINUTE: '1000',
  });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('scoped tokens', () => {
  it('answer /auth/whoami with their role; API_TOKEN has every role', async () => {
    for (const role of ROLES.filter((r) => r !== 'worker')) {
      expect((await service.call('GET', '/auth/whoami', undefined, bearer(TOKENS[role]))).body).toEqual({ role, name: `${role}-1` });
    }
    // A worker token may lease and settle, nothing else: not even ask its role.
    expect((await service.call('GET', '/auth/whoami', undefined, bearer(TOKENS.worker))).status).toBe(403);
    // Unnamed tokens are named by their place: the second read token is read-2.
    expect((await service.call('GET', '/auth/whoami', undefined, bearer('another-read-token-0123'))).body).toEqual({
      role: 'read',
      name: 'read-2',
    });
    expect((await service.call('GET', '/auth/whoami', undefined, bearer(FULL))).body).toEqual({ role: 'admin', name: 'API_TOKEN' });
  });

  it('get a 403 naming the role needed on every route above their role, and change nothing', async () => {
    const created = await service.call(
      'POST',
      '/tasks',
      { type: 'close_order', payload: { orderSn: 'SN1' }, delayMs: 3_600_000, key: 'k:1' },
      bearer(FULL),
    );
    expect(created.status).toBe(201);
    const before = await rows();
    let refused = 0;
    for (const [route, needed] of Object.entries(ROUTE_ROLES)) {
      for (const role of ROLES.filter((r) => !allows(r, needed))) {
        const [method, url, body] = request(route, created.body.id, 'k:1');
        const answer = await service.call(method, url, body, bearer(TOKENS[role]));
        expect(answer.status, `${role} on ${route}`).toBe(403);
        expect(answer.body).toMatchObject({ statusCode: 403, error: 'Forbidden', code: 'PUNCTUAL_FORBIDDEN' });
        expect(answer.body.message).toBe(`this route needs a token with the ${needed} role; this token has the ${role} role`);
        refused++;
      }
    }
    // read is refused the write and admin routes, write the admin routes (pausing and limiting types);
    // worker everything but the worker routes, which read and write are refused too.
    const count = (role: Role) => Object.values(ROUTE_ROLES).filter((r) => r === role).length;
    expect(refused).toBe(count('read') + 2 * count('write') + 3 * count('admin') + 2 * count('worker'));
    expect(refused).toBeGreaterThanOrEqual(5);
    expect(await rows()).toEqual(before);
  });

  it('let each role call the routes of its role and below', async () => {
    for (const role of ROLES) {
      for (const [route, needed] of Object.entries(ROUTE_ROLES)) {
        if (!allows(role, needed)) continue;
        // A stream that never ends: events.test.ts listens to it with each role over a socket.
        if (route === 'GET /events') continue;
        const key = `k:${role}:${route}`;
        const task = await service.call(
          'POST',
          '/tasks',
          { type: 'close_order', payload: { orderSn: 'SN2' }, delayMs: 3_600_000, key },
          bearer(FULL),
        );
        if (route.endsWith('/retry'))
          await db.execute("UPDATE punctual_tasks SET status = 'failed', finished_at = UTC_TIMESTAMP(3) WHERE id = ?", [task.body.id]);
        if (route.endsWith('/release-lease'))
          await db.execute(
            "UPDATE punctual_tasks SET status = 'running', attempts = 1, lease_owner = 'gone:1', lease_until = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE WHERE id = ?",
            [task.body.id],
          );
        const [method, url, body] = request(route, task.body.id, key);
        const answer = await service.app.inject({ method: method as 'GET', url, payload: body as object, headers: bearer(TOKENS[role]) });
        // A settle with a token no lease has is let in, and refused for the token: 409.
        if (/:id\/(ack|nack|extend)$/.test(route)) expect(answer.statusCode, `${role} on ${route}: ${answer.body}`).toBe(409);
        else expect(answer.statusCode, `${role} on ${route}: ${answer.body}`).toBeLessThan(300);
      }
    }
  });

  it('answer 401, not 403, to no token or an unknown one, whatever the route', async () => {
    const before = await rows();
    for (const route of Object.keys(ROUTE_ROLES)) {
      const [method, url, body] = request(route, 1, 'k:1');
      for (const headers of [{}, bearer('unknown-token-0123456789'), { authorization: TOKENS.admin }]) {
        const answer = await service.call(method, url, body, headers);
        expect(answer.status, `${route} with ${JSON.stringify(headers)}`).toBe(401);
      }
    }
    expect(await rows()).toEqual(before);
  });

  it('are in the OpenAPI document: GET /auth/whoami and its answer', async () => {
    const document = (await service.app.inject({ url: '/openapi.json' })).json();
    expect(document.paths['/auth/whoami'].get.responses['200'].content['application/json'].schema.properties.role).toMatchObject({
      anyOf: ROLES.map((role) => expect.objectContaining({ enum: [role] })),
    });
  });

  it('leave the probes and the dashboard page open', async () => {
    for (const url of ['/healthz', '/readyz', '/', '/ui/app.js', '/console/task/1', '/ui/vendor/preact.js', '/openapi.json']) {
      expect((await service.app.inject({ url })).statusCode, url).toBe(200);
    }
  });
});

describe('the role table', () => {
  it('covers every route the app serves: a route without a role stops the start', async () => {
    const app = Fastify();
    installAuth(app, { tokens: new TokenRoles(FULL), failuresPerMinute: 30 });
    app.get('/tasks/pending', async () => ({}));
    app.post('/bulk/cancel', async () => ({}));
    await expect(app.ready()).rejects.toThrow('routes without a role in ROUTE_ROLES (src/http/roles.ts): POST /bulk/cancel');
    await app.close();
  });
});

describe('the token settings', () => {
  it('refuse a short or spaced token without echoing it, and a token given twice', () => {
    const secret = 'short-secret';
    for (const env of [
      { API_TOKENS_READ: secret },
      { API_TOKENS_WRITE: `${TOKENS.write},${secret}` },
      { API_TOKENS_ADMIN: 'has a space in it 0123456789' },
    ]) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(/API_TOKENS_\w+ entry \d must be at least 16 printable characters/);
      try {
        loadConfig(env);
      } catch (error) {
        expect((error as Error).message).not.toContain(secret);
        expect((error as Error).message).not.toContain('space in it');
      }
    }
    expect(() => loadConfig({ API_TOKEN: FULL, API_TOKENS_READ: FULL })).toThrow('a token in API_TOKENS_READ is also given elsewhere');
    expect(() => loadConfig({ API_TOKENS_READ: TOKENS.read, API_TOKENS_ADMIN: TOKENS.read })).toThrow('a token in API_TOKENS_ADMIN');
  });

  it('turn auth on by themselves: a read token alone may listen beyond loopback', () => {
    const config = loadConfig({ HOST: '0.0.0.0', API_TOKENS_READ: TOKENS.read });
    expect(config.roles).toEqual({ read: [TOKENS.read], write: [], admin: [], worker: [], named: [] });
    expect(config.http.apiToken).toBeUndefined();
  });
});
