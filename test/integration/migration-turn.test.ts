/**
 * The migration turn across nodes (src/db/migration-turn.ts), where GET_LOCK does not reach: a
 * row left by a holder on another node that died is taken over once its `until` passes (within
 * TURN_TTL_MS of its last renewal, so within 15 s of the death), and the waiter says once whom
 * it waits for. On one server a dead holder's turn is free at once (test/process/migration-turn.test.ts).
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MigrationTurn, TURN_TTL_MS } from '../../src/db/migration-turn.js';
import { createLogger } from '../../src/observability/log.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('migturn_nodes');
});

afterAll(async () => {
  await db?.drop();
});

describe('the migration turn', () => {
  it("of a holder on another node that died is taken over once its last renewal's time is out, and the wait is told once", async () => {
    const name = `punctual.migrate.${db.name}`.slice(0, 64);
    const conn = await mysql.createConnection({ uri: db.url, timezone: 'Z' });
    const lines: { msg: string; waitingFor?: { holder: string }; previous?: { holder: string } }[] = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    try {
      // What a holder on node 2 leaves when it dies right after a renewal.
      await db.execute(
        `INSERT INTO punctual_migration_turn (name, holder, node, since, until)
         VALUES (?, 'node2-host:4242:dead', 'node2-host:3306', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND)`,
        [name, TURN_TTL_MS * 1000],
      );
      const started = Date.now();
      const turn = await MigrationTurn.take(conn, {
        name,
        holder: 'node1-host:1:alive',
        log,
        connect: () => mysql.createConnection({ uri: db.url, timezone: 'Z' }),
      });
      const waitedMs = Date.now() - started;
      await turn.end();
      expect(waitedMs).toBeGreaterThan(TURN_TTL_MS - 1000);
      expect(waitedMs).toBeLessThan(15_000);
      const waits = lines.filter((line) => line.msg.startsWith('waiting for the migration turn'));
      expect(waits).toHaveLength(1);
      expect(waits[0]!.waitingFor).toMatchObject({ holder: 'node2-host:4242:dead', node: 'node2-host:3306' });
      expect(lines.find((line) => line.msg.startsWith('took over'))?.previous).toMatchObject({ holder: 'node2-host:4242:dead' });
      expect(await db.query<any[]>('SELECT * FROM punctual_migration_turn')).toEqual([]);
    } finally {
      await conn.end();
    }
  }, 30_000);
});
