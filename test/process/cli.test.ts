import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer } from '../helpers/server.js';

const MAIN = fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));

function run(env: Record<string, string>) {
  const result = spawnSync(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 20_000 });
  return { code: result.status, stderr: result.stderr, stdout: result.stdout };
}

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('cli');
});

afterAll(async () => {
  await db?.drop();
});

describe('start-up', () => {
  it.each([
    [{ PORT: 'abc' }, 'punctual: bad configuration: PORT must be an integer between 0 and 65535, got "abc"'],
    [
      { TIMEZONE: 'Asia/Beijing' },
      'punctual: bad configuration: TIMEZONE must be an IANA time zone such as Asia/Shanghai or UTC, got "Asia/Beijing"',
    ],
    [
      { HOST: '0.0.0.0' },
      'punctual: bad configuration: HOST 0.0.0.0 is reachable from other machines: set API_TOKEN, or listen on 127.0.0.1',
    ],
  ])('refuses %j with one clear line and exit code 1', (env, message) => {
    const { code, stderr, stdout } = run(env);
    expect(code).toBe(1);
    expect(stderr.trim()).toBe(message);
    expect(stdout).toBe('');
  });

  it('exits 1 with one clear line naming DATABASE_URL when the database does not answer', () => {
    const { code, stderr } = run({ DATABASE_URL: 'mysql://root@127.0.0.1:1/punctual_nowhere', LOG_LEVEL: 'info', DB_WAIT_MS: '0', PORT: '0' });
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([expect.stringMatching(/^punctual: cannot start: DATABASE_URL: .*ECONNREFUSED/)]);
  });

  it('keeps the token and the webhook secret out of its log', async () => {
    const token = 'a-very-secret-token-123456';
    const secret = 'a-very-secret-webhook-key';
    const server = await startServer({
      env: { DATABASE_URL: db.url, API_TOKEN: token, WEBHOOK_SECRET: secret, WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', LOG_LEVEL: 'trace' },
    });
    try {
      expect((await server.request('GET', '/tasks/pending', undefined, { authorization: `Bearer ${token}` })).status).toBe(200);
      expect((await server.request('GET', '/tasks/pending', undefined, { authorization: `Bearer ${secret}` })).status).toBe(401);
      const created = await server.request(
        'POST',
        '/tasks',
        { type: 'webhook', payload: { url: 'http://127.0.0.1:9/x' }, delayMs: 0 },
        { authorization: `Bearer ${token}` },
      );
      expect(created.status).toBe(201);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const everything = JSON.stringify(server.logs) + server.stderr.join('\n');
    expect(server.logs.length).toBeGreaterThan(3);
    expect(everything).not.toContain(token);
    expect(everything).not.toContain(secret);
  });
});
