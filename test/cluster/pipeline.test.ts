/**
 * Why a batch is not pipelined on a Galera node (src/db/pipeline.ts, Database.pipelines): a
 * transaction that a replicated write aborts while the node runs a multi-statement text does not
 * stop the text. The statements after the abort run on, each committing itself, and the client
 * hears no error: a close_order's stock could come back while its order stayed open. A stored
 * procedure (PROCEDURES) aborted the same way fails with a deadlock and leaves nothing.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { NODES } from '../helpers/galera.js';
import { waitFor } from '../helpers/server.js';

let db: TestDatabase;
const open: mysql.Connection[] = [];

/**
 * A connection to node `n` (1..3) of the cluster, in the test database, once the node has applied
 * every write the cluster committed before (wsrep_sync_wait: the database and its tables are there).
 */
async function onNode(n: number): Promise<mysql.Connection> {
  const conn = await mysql.createConnection({ uri: `mysql://root@${NODES[n - 1]}`, multipleStatements: true });
  open.push(conn);
  await conn.query('SET SESSION wsrep_sync_wait = 1');
  await conn.query('SELECT 1');
  await conn.query(`USE \`${db.name}\``);
  return conn;
}

beforeAll(async () => {
  db = await createTestDatabase('galera_pipeline');
  await db.execute(`CREATE PROCEDURE two_writes() BEGIN
      UPDATE locked SET v = v + 1 WHERE id = 1; DO SLEEP(1); UPDATE after_abort SET v = v + 1 WHERE id = 1; END`);
  for (const table of ['locked', 'after_abort']) {
    await db.execute(`CREATE TABLE ${table} (id INT PRIMARY KEY, v INT NOT NULL)`);
    await db.execute(`INSERT INTO ${table} (id, v) VALUES (1, 0)`);
  }
});

afterAll(async () => {
  for (const conn of open) await conn.end().catch(() => undefined);
  await db?.drop();
});

describe('a multi-statement text on a Galera node', () => {
  /**
   * Sends `text` through node 2 and, while it sleeps holding the row lock of `locked`, writes the
   * row through node 3. Answers the text's error code ('no error' if none) and the two tables.
   */
  async function abortMidway(text: string): Promise<{ answer: string; locked: number; afterAbort: number }> {
    const victim = await onNode(2);
    const watcher = await onNode(2);
    const other = await onNode(3);
    // Set back through the victim's own node, so no replicated write of it meets the text there.
    await victim.query('UPDATE locked SET v = 0; UPDATE after_abort SET v = 0');
    const [[{ id }]] = (await victim.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
    const sent = victim.query(text).then(
      () => 'no error',
      (error: { code?: string }) => String(error.code),
    );
    let answered = false;
    void sent.then(() => (answered = true));
    await waitFor(
      async () => {
        if (answered) throw new Error(`the text ended before it slept: ${await sent}`);
        const [rows] = await watcher.query<mysql.RowDataPacket[]>(
          'SELECT STATE AS state FROM information_schema.PROCESSLIST WHERE ID = ?',
          [id],
        );
        return rows[0]?.state === 'User sleep';
      },
      10_000,
      'the text to sleep',
    );
    await other.query('UPDATE locked SET v = v + 100 WHERE id = 1');
    const answer = await sent;
    await victim.query('ROLLBACK');
    const [[row]] = (await other.query(
      'SELECT (SELECT v FROM locked) AS locked, (SELECT v FROM after_abort) AS afterAbort',
    )) as unknown as [[{ locked: number; afterAbort: number }]];
    return { answer, locked: row.locked, afterAbort: row.afterAbort };
  }

  it('runs on after a replicated write aborted its transaction, each statement committing itself, with no error', async () => {
    // The text ends in ROLLBACK: in one transaction, nothing of it would stay.
    const seen = await abortMidway(
      'BEGIN; UPDATE locked SET v = v + 1 WHERE id = 1; DO SLEEP(1); UPDATE after_abort SET v = v + 1 WHERE id = 1; ROLLBACK',
    );
    expect(seen.answer).toBe('no error');
    // The text's first write was undone by the abort; the one after it committed on its own.
    expect(seen.locked).toBe(100);
    expect(seen.afterAbort).toBeGreaterThan(0);
  });

  it('but a stored procedure aborted the same way fails with a deadlock, and nothing of it stays', async () => {
    const seen = await abortMidway('BEGIN; CALL two_writes(); UPDATE after_abort SET v = v + 10 WHERE id = 1; ROLLBACK');
    expect(seen).toEqual({ answer: 'ER_LOCK_DEADLOCK', locked: 100, afterAbort: 0 });
  });

  it('is why punctual does not pipeline a batch through a Galera node', async () => {
    const database = new Database({ url: `mysql://root@${NODES[1]}/${db.name}`, poolSize: 1, lockWaitTimeoutS: 1 });
    try {
      expect(await database.pipelines()).toBe(false);
    } finally {
      await database.close();
    }
  });
});
