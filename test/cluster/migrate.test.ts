/**
 * Migrations on a Galera cluster, where GET_LOCK holds on one node only:
 * - two processes booting at once through two nodes both migrate: the second waits for the
 *   first instead of failing on "table exists";
 * - a start killed inside a statement through node 1, while it holds the turn: a start through
 *   node 2 waits for the turn's row to run out (no lock of node 1 tells it the holder is gone),
 *   then takes it over, within 15 s of the kill, and finishes.
 */
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { dropDatabase, ensureDatabase } from '../../src/db/connection.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { MIGRATIONS_FOLDER, MIGRATIONS_TABLE } from '../../src/db/migration-files.js';
import { readdirSync } from 'node:fs';
import { NODES, urlFrom } from '../helpers/galera.js';
import { Proxy } from '../helpers/proxy.js';
import { killLeftoverServers, launchServer, waitFor } from '../helpers/server.js';

const migrations = readdirSync(MIGRATIONS_FOLDER).filter((file) => file.endsWith('.sql')).length;

async function recorded(url: string): Promise<number> {
  const conn = await mysql.createConnection({ uri: url });
  try {
    const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${MIGRATIONS_TABLE}`);
    return Number(rows[0]?.n);
  } finally {
    await conn.end();
  }
}

describe('migrations on a Galera cluster', () => {
  it('run at once through two nodes: both succeed, each migration applied once', async () => {
    for (let round = 0; round < 5; round++) {
      const name = `punctual_test_migrace_${Math.floor(Date.now() / 1000)}_${round}`;
      const viaTwo = `mysql://root@127.0.0.1:33062/${name}`;
      const viaThree = `mysql://root@127.0.0.1:33063/${name}`;
      await ensureDatabase(viaTwo, name);
      await ensureDatabase(viaThree, name);
      try {
        await Promise.all([migrateDatabase(viaTwo, name), migrateDatabase(viaThree, name)]);
        expect(await recorded(viaThree)).toBe(migrations);
      } finally {
        await dropDatabase(viaTwo, name);
      }
    }
  });

  it('of a start killed through node 1 while it holds the turn are finished by a start through node 2 within 15 s', async () => {
    const name = `punctual_test_migkill_${Math.floor(Date.now() / 1000)}`;
    let onHeld: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (onHeld = resolve));
    const proxy = await new Proxy({
      targetPort: 33061,
      onQuery: (query) =>
        query.startsWith('/* punctual 0013_task_group 1/1 */')
          ? () => {
              onHeld();
              return 'drop';
            }
          : undefined,
    }).start();
    try {
      const first = launchServer({ env: { DATABASE_URL: proxy.url(name) } });
      await held;
      const second = launchServer({ env: { DATABASE_URL: urlFrom(2, name) } });
      await waitFor(async () => second.logs.some((line) => line.msg.startsWith('waiting for the migration turn')), 30_000, 'the wait');
      first.child.kill('SIGKILL');
      const killedAt = Date.now();
      await second.ready;
      const readyMs = Date.now() - killedAt;
      console.log(`through node 2: ready ${readyMs} ms after the holder's kill through node 1`);
      expect(readyMs).toBeLessThan(15_000);
      expect(await recorded(`mysql://root@${NODES[2]}/${name}`)).toBe(migrations);
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    } finally {
      killLeftoverServers();
      await proxy.stop();
      await dropDatabase(urlFrom(1, name), name);
    }
  });
});
