/**
 * A shop that migrates with one user and runs the service with another, granted only reads and
 * writes on punctual's database (no DDL): the service starts on the migrated database, takes a
 * create and runs it. A start used to run CREATE DATABASE IF NOT EXISTS whatever it found, which
 * such a user may not, and which on Galera aborts the writes running on every node
 * (test/cluster/galera-create-ids.test.ts); it now looks the database up first.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, SERVER_URL, type TestDatabase } from '../helpers/db.js';
import { killLeftoverServers, startServer, waitFor, type ServerProcess } from '../helpers/server.js';

let db: TestDatabase;
let root: mysql.Connection;
let server: ServerProcess | undefined;
const user = `pr_${Math.random().toString(36).slice(2, 8)}`;
const password = `pw${Math.random().toString(36).slice(2, 10)}`;

beforeAll(async () => {
  db = await createTestDatabase('runtime_grants');
  root = await mysql.createConnection({ uri: SERVER_URL });
  await root.query('CREATE USER ?@? IDENTIFIED BY ?', [user, '%', password]);
  await root.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON \`${db.name}\`.* TO ?@?`, [user, '%']);
});

afterAll(async () => {
  await server?.stop();
  killLeftoverServers();
  await root?.query('DROP USER IF EXISTS ?@?', [user, '%']).catch(() => undefined);
  await root?.end();
  await db?.drop();
});

describe('a runtime user without DDL grants', () => {
  it('starts on the migrated database, and a task created through it runs', async () => {
    const url = new URL(db.url);
    url.username = user;
    url.password = password;
    server = await startServer({ env: { DATABASE_URL: url.toString(), WORKER_TYPES: 'granted' } });
    const created = await server.request('POST', '/tasks', { type: 'granted', payload: { n: 1 }, delayMs: 0 });
    expect(created.status).toBe(201);
    const leased = await waitFor(async () => {
      const answer = await server!.request('POST', '/workers/lease', { types: ['granted'], max: 1, leaseMs: 5000 });
      return answer.body.tasks?.length === 1 ? answer.body.tasks[0] : undefined;
    });
    expect(leased.id).toBe(created.body.id);
    const acked = await server.request('POST', '/workers/ack', { acks: [{ id: leased.id, leaseToken: leased.leaseToken }] });
    expect(acked.status).toBe(200);
    const [rows] = await root.query<mysql.RowDataPacket[]>(`SELECT status FROM \`${db.name}\`.punctual_tasks WHERE id = ?`, [
      created.body.id,
    ]);
    expect(rows[0]?.status).toBe('done');
  });
});
