/**
 * Two processes booting at once through two Galera nodes both migrate (GET_LOCK holds on one node
 * only): the second waits for the first instead of failing on "table exists".
 */
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { dropDatabase, ensureDatabase } from '../../src/db/connection.js';
import { MIGRATIONS_FOLDER, MIGRATIONS_TABLE, migrateDatabase } from '../../src/db/migrate.js';
import { readdirSync } from 'node:fs';

describe('migrations on a Galera cluster', () => {
  it('run at once through two nodes: both succeed, each migration applied once', async () => {
    const migrations = readdirSync(MIGRATIONS_FOLDER).filter((file) => file.endsWith('.sql')).length;
    for (let round = 0; round < 5; round++) {
      const name = `punctual_test_migrace_${Math.floor(Date.now() / 1000)}_${round}`;
      const viaTwo = `mysql://root@127.0.0.1:33062/${name}`;
      const viaThree = `mysql://root@127.0.0.1:33063/${name}`;
      await ensureDatabase(viaTwo, name);
      await ensureDatabase(viaThree, name);
      try {
        await Promise.all([migrateDatabase(viaTwo, name), migrateDatabase(viaThree, name)]);
        const conn = await mysql.createConnection({ uri: viaThree });
        try {
          const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${MIGRATIONS_TABLE}`);
          expect(Number(rows[0]?.n)).toBe(migrations);
        } finally {
          await conn.end();
        }
      } finally {
        await dropDatabase(viaTwo, name);
      }
    }
  });
});
