/**
 * TLS to the database, against a private MariaDB this file starts (its own datadir, port and
 * socket, certificates made by openssl here, a user that is REQUIRE SSL), never the shared server.
 * Each case starts the real server (dist/app/main.js) and either sees it run a task or sees it
 * exit 1 with one line naming the setting at fault.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { preparePrivateMariaDb, TLS_PASSWORD, type PrivateMariaDb } from '../helpers/private-mariadb.js';
import { type ServerProcess, startServer, waitFor } from '../helpers/server.js';
import { startFailure } from '../helpers/start-failure.js';
import { Database } from '../../src/db/connection.js';

// Servers start one after the other on a loaded 2-core machine: generous, nothing here is timed.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let db: PrivateMariaDb;
let passwordFile: string;
let database = 0;
/** A database name of its own per case: each server migrates a fresh one. */
const nextName = () => `punctual_tls_${++database}`;

beforeAll(async () => {
  db = await preparePrivateMariaDb();
  await db.start();
  passwordFile = join(db.dir, 'password');
  writeFileSync(passwordFile, `${TLS_PASSWORD}\n`);
});

afterAll(async () => {
  await db?.remove();
});

/** The shop's tables and one unpaid order, so a close_order task has an effect to count. */
async function createShop(name: string): Promise<void> {
  await db.query(`CREATE TABLE ${name}.goods (id BIGINT UNSIGNED PRIMARY KEY, stock INT NOT NULL)`);
  await db.query(
    `CREATE TABLE ${name}.orders (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL UNIQUE,
     status VARCHAR(16) NOT NULL DEFAULT 'unpaid', items JSON NOT NULL, closed_at DATETIME(3) NULL)`,
  );
  await db.query(`INSERT INTO ${name}.goods VALUES (1, 10)`);
  await db.query(`INSERT INTO ${name}.orders (order_sn, items) VALUES ('TLS1', '[{"goods_id":1,"num":2}]')`);
}

/** Creates a task due now and waits for its effect: the order closed, the stock back. */
async function runsATask(server: ServerProcess, name: string): Promise<void> {
  await createShop(name);
  const created = await server.request('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'TLS1' }, delayMs: 0 });
  expect(created.status).toBe(201);
  await waitFor(async () => (await db.query(`SELECT stock FROM ${name}.goods WHERE id = 1`))[0]?.stock === 12, 30_000, 'the task to run');
  expect((await db.query(`SELECT status FROM ${name}.orders`))[0]?.status).toBe('closed');
}

const tlsEnv = (host: string, name: string, mode: string, ca?: string) => ({
  DATABASE_URL: db.url(host, name, false),
  DATABASE_PASSWORD_FILE: passwordFile,
  DATABASE_SSL_MODE: mode,
  ...(ca === undefined ? {} : { DATABASE_SSL_CA: ca }),
});

describe('TLS to the database', () => {
  it('verify-identity with the right CA and name connects and runs a task', async () => {
    const name = nextName();
    const server = await startServer({ env: tlsEnv('localhost', name, 'verify-identity', db.ca) });
    try {
      await runsATask(server, name);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('refuses a server whose certificate the CA did not sign, in one line naming DATABASE_SSL_CA', async () => {
    const failure = await startFailure(tlsEnv('localhost', nextName(), 'verify-ca', db.wrongCa));
    expect(failure.line).toMatch(/^punctual: cannot start: DATABASE_SSL_CA: .*not vouched for/);
    expect(failure.line).not.toContain(TLS_PASSWORD);
  });

  it('refuses a name the certificate does not hold under verify-identity, accepts it under verify-ca', async () => {
    const failure = await startFailure(tlsEnv('127.0.0.1', nextName(), 'verify-identity', db.ca));
    expect(failure.line).toMatch(/^punctual: cannot start: DATABASE_SSL_MODE=verify-identity: .*does not name/);
    const name = nextName();
    const server = await startServer({ env: tlsEnv('127.0.0.1', name, 'verify-ca', db.ca) });
    expect(await server.stop()).toBe(0);
  });

  it('connects with required and no CA: encrypted (the user is REQUIRE SSL), nothing verified', async () => {
    const server = await startServer({ env: tlsEnv('127.0.0.1', nextName(), 'required') });
    expect(await server.stop()).toBe(0);
  });

  it('plain TCP to a REQUIRE SSL user is refused in one line naming DATABASE_URL and the TLS setting', async () => {
    const failure = await startFailure({ DATABASE_URL: db.url('127.0.0.1', nextName()) });
    expect(failure.line).toMatch(/^punctual: cannot start: DATABASE_URL: the database refused the login: .*DATABASE_SSL_MODE/);
    expect(failure.line).not.toContain(TLS_PASSWORD);
  });

  it('uses TLS to every host of a multi-host DATABASE_URL, and holds each host to its own name', async () => {
    const name = nextName();
    const two = `localhost:${db.port},localhost:${db.port}`;
    const env = { ...tlsEnv('localhost', name, 'verify-identity', db.ca), DATABASE_URL: `mysql://tls_user@${two}/${name}` };
    const server = await startServer({ env });
    try {
      await runsATask(server, name);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    // The pool's first host is 127.0.0.1, a name the certificate does not hold: refused, though
    // the migration's connection found its way to the second host.
    const wrongFirst = `127.0.0.1:${db.port},localhost:${db.port}`;
    const failure = await startFailure({ ...env, DATABASE_URL: `mysql://tls_user@${wrongFirst}/${nextName()}` });
    expect(failure.line).toMatch(/^punctual: cannot start: DATABASE_SSL_MODE=verify-identity: .*does not name/);
  });

  describe('a pool under verify-identity, through TLS session resumption', () => {
    /** A pool on `host`, and how to tell whether the connection it hands out next resumed a session. */
    const pool = (host: string) =>
      new Database({
        url: db.url(host, 'mysql', false),
        poolSize: 4,
        lockWaitTimeoutS: 5,
        access: { password: TLS_PASSWORD, sslMode: 'verify-identity', sslCa: { content: readFileSync(db.ca) } },
      });
    const resumed = (database: Database) =>
      database.withConnection(async (conn) => {
        const socket = (conn.connection as unknown as { stream: TLSSocket }).stream;
        await conn.query('SELECT 1');
        return socket.isSessionReused();
      });

    it('opens connection after connection: a resumed session (no certificate shown) is not refused', async () => {
      const database = pool('localhost');
      try {
        // The first connection stays checked out, so the second is opened after the first's session came.
        const reused = await database.withConnection(async (first) => {
          await first.query('SELECT 1');
          return resumed(database);
        });
        expect(reused).toBe(true); // the case this covers did happen
      } finally {
        await database.close();
      }
    });

    it('once a name was refused, refuses resumed sessions too: that server may have left its ticket', async () => {
      // 127.0.0.1 is not in the certificate: the full handshake is refused, its session kept by mysql2.
      const database = pool('127.0.0.1');
      try {
        await expect(resumed(database)).rejects.toThrow(/does not name|IP: 127.0.0.1 is not in the cert/);
        await expect(resumed(database)).rejects.toThrow(/resumed TLS session/);
      } finally {
        await database.close();
      }
    });
  });
});
