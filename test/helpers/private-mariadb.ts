/**
 * A MariaDB of the test's own: its data directory made by mariadb-install-db in a temp dir, its own
 * port and socket, TLS from certificates made by openssl at test time, and a user that is
 * REQUIRE SSL. Never the shared server on 3306. stop() ends it; remove() deletes everything.
 *
 * The server certificate names `localhost` only, so 127.0.0.1 is a name it does not hold; a
 * second CA that signed nothing of this server is there to be the wrong one.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';

export const TLS_USER = 'tls_user';
export const TLS_PASSWORD = 'tls-password-0123';

export interface PrivateMariaDb {
  dir: string;
  port: number;
  socket: string;
  /** PEM files. */
  ca: string;
  wrongCa: string;
  /** `mysql://tls_user:…@<host>:<port>/<database>` */
  url(host: string, database: string, withPassword?: boolean): string;
  start(): Promise<void>;
  stop(): Promise<void>;
  remove(): Promise<void>;
  /** Rows of a query as root over the socket. */
  query(sql: string): Promise<mysql.RowDataPacket[]>;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A port free right now (the server binds it a moment later; tests pick one each). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function makeCertificates(dir: string): void {
  for (const ca of ['ca', 'wrong-ca']) {
    openssl(
      dir,
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=punctual test ${ca}`,
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.pem`,
    );
  }
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr');
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost\n');
  openssl(
    dir,
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    'san.ext',
    '-out',
    'server.pem',
  );
}

export async function preparePrivateMariaDb(): Promise<PrivateMariaDb> {
  const dir = mkdtempSync(join(tmpdir(), 'punctual-mariadb-'));
  makeCertificates(dir);
  const data = join(dir, 'data');
  execFileSync(
    'mariadb-install-db',
    ['--no-defaults', `--datadir=${data}`, '--user=root', '--skip-test-db', '--auth-root-authentication-method=socket'],
    {
      stdio: 'ignore',
    },
  );
  // Run at every start: the user exists from the first one on.
  const initFile = join(dir, 'init.sql');
  writeFileSync(
    initFile,
    [
      `CREATE USER IF NOT EXISTS '${TLS_USER}'@'%' IDENTIFIED BY '${TLS_PASSWORD}' REQUIRE SSL;`,
      `GRANT ALL ON *.* TO '${TLS_USER}'@'%';`,
      `CREATE USER IF NOT EXISTS '${TLS_USER}'@'localhost' IDENTIFIED BY '${TLS_PASSWORD}' REQUIRE SSL;`,
      `GRANT ALL ON *.* TO '${TLS_USER}'@'localhost';`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const socket = join(dir, 'mariadb.sock');
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> | undefined;

  const query = async (sql: string) => {
    const conn = await mysql.createConnection({ socketPath: socket, user: 'root' });
    try {
      const [rows] = await conn.query<mysql.RowDataPacket[]>(sql);
      return rows;
    } finally {
      await conn.end();
    }
  };

  const db: PrivateMariaDb = {
    dir,
    port,
    socket,
    ca: join(dir, 'ca.pem'),
    wrongCa: join(dir, 'wrong-ca.pem'),
    url: (host, database, withPassword = true) =>
      `mysql://${TLS_USER}${withPassword ? `:${TLS_PASSWORD}` : ''}@${host}:${port}/${database}`,
    async start() {
      child = spawn(
        'mariadbd',
        [
          '--no-defaults',
          `--datadir=${data}`,
          '--user=root',
          `--port=${port}`,
          '--bind-address=127.0.0.1',
          `--socket=${socket}`,
          `--pid-file=${join(dir, 'mariadb.pid')}`,
          `--init-file=${initFile}`,
          `--ssl-ca=${join(dir, 'ca.pem')}`,
          `--ssl-cert=${join(dir, 'server.pem')}`,
          `--ssl-key=${join(dir, 'server.key')}`,
          '--innodb-buffer-pool-size=32M',
          '--skip-log-bin',
          '--skip-name-resolve',
        ],
        { stdio: 'ignore' },
      );
      exited = once(child, 'exit');
      const deadline = Date.now() + 60_000;
      for (;;) {
        try {
          await query('SELECT 1');
          return;
        } catch (error) {
          if (child.exitCode !== null || Date.now() > deadline)
            throw new Error(`the private MariaDB did not start: ${String(error)}`, { cause: error });
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    },
    async stop() {
      if (child === undefined || child.exitCode !== null) return;
      child.kill('SIGTERM');
      await exited;
      child = undefined;
    },
    async remove() {
      await db.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    query,
  };
  return db;
}
