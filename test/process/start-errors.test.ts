/**
 * Start-up errors of the real server: each is one line on stderr naming the setting at fault,
 * exit 1, no stack (unless LOG_LEVEL=debug). A port in use is found before any migration; a
 * database that comes up late is waited for (DB_WAIT_MS).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, SERVER_URL, type TestDatabase } from '../helpers/db.js';
import { freePort, preparePrivateMariaDb } from '../helpers/private-mariadb.js';
import { startServer } from '../helpers/server.js';
import { startFailure } from '../helpers/start-failure.js';

const MAIN = fileURLToPath(new URL('../../dist/app/main.js', import.meta.url));

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let dir: string;
let db: TestDatabase;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'punctual-start-'));
  db = await createTestDatabase('start_errors', { create: false });
});

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  // The service under test created it (the last test starts one): dropped, if it is there.
  await db?.drop();
});

describe('start-up errors', () => {
  it('a wrong database password is one line naming DATABASE_URL', async () => {
    const url = SERVER_URL.replace('mysql://root@', 'mysql://root:not-the-password@');
    const failure = await startFailure({ DATABASE_URL: `${url}/${db.name}` });
    expect(failure.line).toMatch(/^punctual: cannot start: DATABASE_URL: the database refused the login/);
    expect(failure.line).not.toContain('not-the-password');
  });

  it("a shop database that has tables named like punctual's own (its prefix): one line naming them, at once, and nothing touched", async () => {
    const shop = await createTestDatabase('start_collision', { create: false });
    const admin = await mysql.createConnection({ uri: SERVER_URL });
    try {
      await admin.query(`CREATE DATABASE \`${shop.name}\``);
      await admin.query(`CREATE TABLE \`${shop.name}\`.punctual_tasks (id INT PRIMARY KEY, title VARCHAR(100))`);
      await admin.query(`CREATE TABLE \`${shop.name}\`.punctual_members (id INT PRIMARY KEY, nickname VARCHAR(50))`);
      await admin.query(`INSERT INTO \`${shop.name}\`.punctual_tasks VALUES (1, 'pack the boxes')`);
      const started = Date.now();
      const failure = await startFailure({ DATABASE_URL: `${SERVER_URL.replace(/\/$/, '')}/${shop.name}` });
      const took = Date.now() - started;
      expect(failure.line).toMatch(
        /^punctual: cannot start: DATABASE_URL: the database .* already has tables named like punctual's own: punctual_members, punctual_tasks/,
      );
      // At once: not after the migration lock's 60 s.
      expect(took).toBeLessThan(15_000);
      const [tables] = await admin.query<mysql.RowDataPacket[]>(
        'SELECT table_name AS name FROM information_schema.TABLES WHERE table_schema = ? ORDER BY 1',
        [shop.name],
      );
      // The shop's two, as they were; of its own, punctual made only its migration turn.
      const names = tables.map((row) => String(row.name ?? row.NAME));
      expect(names.filter((name) => name !== 'punctual_migration_turn')).toEqual(['punctual_members', 'punctual_tasks']);
      const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT id, title FROM \`${shop.name}\`.punctual_tasks`);
      expect(rows).toEqual([{ id: 1, title: 'pack the boxes' }]);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS \`${shop.name}\``);
      await admin.end();
      await shop.drop().catch(() => undefined);
    }
  });

  it('a closed database port is one line naming DATABASE_URL after DB_WAIT_MS', async () => {
    const port = await freePort();
    const failure = await startFailure({ DATABASE_URL: `mysql://root@127.0.0.1:${port}/${db.name}`, DB_WAIT_MS: '1000' });
    expect(failure.line).toMatch(/^punctual: cannot start: DATABASE_URL: no database answered within DB_WAIT_MS \(1000 ms\): ECONNREFUSED/);
    // Listening came first (a port in use is found before the database), but no line said it was ready.
    expect(failure.stdout).toContain('booting: requests but /healthz and /readyz wait until \\"punctual is ready\\"');
    expect(failure.stdout).not.toMatch(/Server listening|"msg":"punctual is ready"/);
  });

  it('a port in use is one line naming PORT, found before any migration', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const failure = await startFailure({ DATABASE_URL: db.url, PORT: String(port) });
      expect(failure.line).toBe(
        `punctual: cannot start: PORT ${port} on 127.0.0.1 is already in use by another process: choose another PORT`,
      );
    } finally {
      taken.close();
    }
    // Nothing ran: the database was not even created, so no migration table in it.
    const conn = await mysql.createConnection({ uri: SERVER_URL });
    try {
      const [tables] = await conn.query('SELECT table_name FROM information_schema.tables WHERE table_schema = ?', [db.name]);
      expect(tables).toEqual([]);
    } finally {
      await conn.end();
    }
  });

  it('shows the stack at LOG_LEVEL=debug only', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: `mysql://root@127.0.0.1:${port}/${db.name}`, DB_WAIT_MS: '0', LOG_LEVEL: 'debug' };
    const run = spawnSync(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(/"level":60.*"stack":"DatabaseNotUp/);
    expect(run.stderr).toMatch(/^punctual: cannot start: DATABASE_URL: /);
  });

  it('reads secrets from files, and refuses a file it cannot read or both forms at once', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'file-token-0123456789abcdef\n');
    const missing = await startFailure({ DATABASE_URL: db.url, API_TOKEN_FILE: join(dir, 'nope') });
    expect(missing.line).toBe(
      `punctual: bad configuration: API_TOKEN_FILE: cannot read ${JSON.stringify(join(dir, 'nope'))} (no such file)`,
    );
    const both = await startFailure({ DATABASE_URL: db.url, API_TOKEN_FILE: tokenFile, API_TOKEN: 'env-token-0123456789abcdef' });
    expect(both.line).toBe('punctual: bad configuration: API_TOKEN and API_TOKEN_FILE are both set: set one of them');
    const server = await startServer({ env: { DATABASE_URL: db.url, API_TOKEN_FILE: tokenFile } });
    try {
      expect((await server.request('GET', '/tasks/pending')).status).toBe(401);
      // The file's content without its trailing newline is the token.
      expect(
        (await server.request('GET', '/tasks/pending', undefined, { authorization: 'Bearer file-token-0123456789abcdef' })).status,
      ).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('waits for a database that comes up after it, saying so, then boots', async () => {
    const late = await preparePrivateMariaDb();
    try {
      let said = false;
      let saidWaiting: () => void = () => undefined;
      const waiting = new Promise<void>((resolve) => (saidWaiting = resolve));
      const server = startServer({
        env: { DATABASE_URL: late.url('127.0.0.1', 'punctual_late'), DATABASE_SSL_MODE: 'required', DB_WAIT_MS: '90000' },
        timeoutMs: 100_000,
        onLog: (line) => {
          if (line.msg !== 'the database does not answer yet: waiting') return;
          said = true;
          saidWaiting();
        },
      });
      // The database comes up only once the server said it waits for it: the server must have waited.
      await Promise.race([
        waiting,
        server.then(() => {
          if (!said) throw new Error('ready without a database');
        }),
      ]);
      await late.start();
      const running = await server;
      const [tables] = await late.query("SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = 'punctual_late'");
      expect(Number(tables?.n)).toBeGreaterThan(0);
      expect(await running.stop()).toBe(0);
    } finally {
      await late.remove();
    }
  });
});
