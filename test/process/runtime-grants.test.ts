/**
 * Least privilege, as a shop sets it up (docs/production.md#database-users): a migrating user with
 * MIGRATE_GRANTS runs `punctual migrate`, and the service runs as a user granted only reads and
 * writes (RUN_GRANTS), each a process of its own.
 * - The migrating user migrates an empty database and one the previous release migrated (its
 *   views need CREATE VIEW, and DROP to make them again).
 * - The runtime user's doctor passes; it starts, takes a create and runs it.
 * - On a database with migrations pending, the runtime user's start stops at once with a line
 *   naming them and what to run, and its doctor fails on it (it used to wait 60 s for nothing).
 * A start used to run CREATE DATABASE IF NOT EXISTS whatever it found, which such a user may not,
 * and which on Galera aborts the writes running on every node (test/cluster/galera-create-ids.test.ts).
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATE_GRANTS, RUN_GRANTS } from '../../src/app/cli-doctor.js';
import { ensureDatabase } from '../../src/db/connection.js';
import { migrationJournal } from '../../src/db/migration-files.js';
import { SERVER_URL, type TestDatabase } from '../helpers/db.js';
import { punctual } from '../helpers/cli.js';
import { databaseFor, recordedMigrations } from '../helpers/migration-kills.js';
import { killLeftoverServers, launchServer, startServer, waitFor } from '../helpers/server.js';

/** The migrations after the previous release's (0019): what a database it migrated lacks. */
const SINCE_PREVIOUS = migrationJournal().filter((entry) => entry.tag >= '0020').length;

let root: mysql.Connection;
const databases: TestDatabase[] = [];
const users: string[] = [];

beforeAll(async () => {
  root = await mysql.createConnection({ uri: SERVER_URL });
});

afterAll(async () => {
  killLeftoverServers();
  for (const user of users) await root?.query('DROP USER IF EXISTS ?@?', [user, '%']).catch(() => undefined);
  await root?.end();
  for (const db of databases) await db.drop();
});

/** A user granted `grants` on `db` alone; answers `db`'s URL as that user. */
async function userOn(db: TestDatabase, grants: readonly string[]): Promise<string> {
  const user = `pr_${Math.random().toString(36).slice(2, 8)}`;
  const password = `pw${Math.random().toString(36).slice(2, 10)}`;
  users.push(user);
  await root.query('CREATE USER ?@? IDENTIFIED BY ?', [user, '%', password]);
  await root.query(`GRANT ${grants.join(', ')} ON \`${db.name}\`.* TO ?@?`, [user, '%']);
  const url = new URL(db.url);
  url.username = user;
  url.password = password;
  return url.toString();
}

async function database(path: 'empty' | 'previous release', label: string): Promise<TestDatabase> {
  const db = await databaseFor(path, label);
  databases.push(db);
  await ensureDatabase(db.url, db.name); // made by the DBA, as the users' grants are
  return db;
}

describe('a migrating user and a runtime user', () => {
  it.each(['empty', 'previous release'] as const)(
    'migrate (from the %s) with `punctual migrate`; the runtime user passes doctor, starts and runs a task',
    async (path) => {
      const db = await database(path, 'grants');
      const migrated = await punctual(['migrate'], { DATABASE_URL: await userOn(db, MIGRATE_GRANTS) });
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(await recordedMigrations(db)).toBe(migrationJournal().length);

      const runtime = await userOn(db, RUN_GRANTS);
      const doctor = await punctual(['doctor'], { DATABASE_URL: runtime });
      expect(doctor.stdout).toMatch(/^ok\s+grants to run: SELECT, INSERT, UPDATE, DELETE on /m);
      expect(doctor.stdout).toMatch(/^ok\s+migrations: up to date; this user cannot migrate/m);

      const server = await startServer({ env: { DATABASE_URL: runtime, WORKER_TYPES: 'granted' } });
      try {
        const created = await server.request('POST', '/tasks', { type: 'granted', payload: { n: 1 }, delayMs: 0 });
        expect(created.status).toBe(201);
        const leased = await waitFor(async () => {
          const answer = await server.request('POST', '/workers/lease', { types: ['granted'], max: 1, leaseMs: 5000 });
          return answer.body.tasks?.[0];
        });
        expect((await server.request('POST', '/workers/ack', { acks: [{ id: leased.id, leaseToken: leased.leaseToken }] })).status).toBe(
          200,
        );
        const [rows] = await root.query<mysql.RowDataPacket[]>(`SELECT status FROM \`${db.name}\`.punctual_tasks WHERE id = ?`, [
          created.body.id,
        ]);
        expect(rows[0]?.status).toBe('done');
      } finally {
        expect(await server.stop()).toBe(0);
      }
    },
    120_000,
  );

  it('stops a runtime start at once on a database with migrations pending, naming them and the fix; doctor fails on it', async () => {
    const db = await database('previous release', 'grants_pending');
    const runtime = await userOn(db, RUN_GRANTS);
    const doctor = await punctual(['doctor'], { DATABASE_URL: runtime });
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(
      new RegExp(`^FAIL\\s+migrations: ${SINCE_PREVIOUS} pending \\(0020_own_namespace, .*\\) and this user cannot apply them`, 'm'),
    );
    const started = Date.now();
    const server = launchServer({ env: { DATABASE_URL: runtime } });
    expect(await server.exited).toBe(1);
    expect(Date.now() - started).toBeLessThan(10_000);
    const said = server.stderr.join('\n');
    expect(said).toContain(`punctual: cannot start: DATABASE_URL: ${SINCE_PREVIOUS} migration(s) are pending`);
    expect(said).toContain('run `punctual migrate` as a user with the migrating grants');
    expect(said).not.toMatch(/pw[a-z0-9]{8}/); // the password stays out
  }, 60_000);
});
