/**
 * The pipelined transaction (src/db/pipeline.ts) against MariaDB: BEGIN travels with the first
 * statement, held writes with COMMIT, so a batch costs two round trips fewer; a count the
 * server's check refuses stops the text before its COMMIT, and nothing of it stays.
 */
import type { PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { pipelineOf } from '../../src/db/pipeline.js';
import { type ConnectionSource, ONCE, transaction } from '../../src/db/transaction.js';
import { DB } from '../../src/db/sql.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let database: Database;

beforeAll(async () => {
  db = await createTestDatabase('pipeline');
  database = new Database({ url: db.url, poolSize: 2, lockWaitTimeoutS: 1 });
  await db.execute('CREATE TABLE cells (id INT PRIMARY KEY, v INT NOT NULL)');
});

beforeEach(async () => {
  await db.execute('DELETE FROM cells');
  await db.execute('INSERT INTO cells (id, v) VALUES (1, 0), (2, 0), (3, 0)');
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

const values = async () =>
  (await db.query<({ id: number; v: number } & RowDataPacket)[]>('SELECT id, v FROM cells ORDER BY id')).map((row) => row.v);

/** Counts what goes to the server: every call of the connection's own query is one round trip. */
function counting(conn: PoolConnection, sent: string[]): void {
  const own = conn.query.bind(conn);
  (conn as unknown as { query: unknown }).query = (options: string | { sql: string }, ...rest: unknown[]) => {
    sent.push(typeof options === 'string' ? options : options.sql);
    return (own as (...args: unknown[]) => unknown)(options, ...rest);
  };
}

describe('a pipelined transaction', () => {
  it('is what a batch uses on a single MariaDB server (on a Galera node it is not: test/cluster/pipeline.test.ts)', async () => {
    expect(await database.pipelines()).toBe(true);
  });

  it('sends BEGIN with the first statement and held writes with COMMIT: two round trips', async () => {
    const sent: string[] = [];
    const source: ConnectionSource<PoolConnection> = {
      withConnection: (fn) => database.withConnection((conn) => (counting(conn, sent), fn(conn))),
    };
    const read = await transaction(
      source,
      async (conn) => {
        const [rows] = await conn.query<RowDataPacket[]>('SELECT id FROM cells WHERE id IN (1, 2) ORDER BY id FOR UPDATE');
        const pipeline = pipelineOf(conn)!;
        pipeline.queue('UPDATE cells SET v = v + ? WHERE id IN (?)', [5, [1, 2]]);
        pipeline.queue(DB.expectRowCount, [2]);
        pipeline.queue('UPDATE cells SET v = ? WHERE id = ?', [9, 3]);
        return rows.map((row) => Number(row.id));
      },
      { retry: ONCE, pipelined: true },
    );
    expect(read).toEqual([1, 2]);
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^BEGIN;\nSELECT id FROM cells/);
    expect(sent[1]).toMatch(/;\nCOMMIT$/);
    expect(await values()).toEqual([5, 5, 9]);
  });

  it('stops before COMMIT when a count is not what the settle expects: nothing of it stays', async () => {
    const work = transaction(
      database,
      async (conn) => {
        await conn.query('SELECT id FROM cells WHERE id IN (1, 2) FOR UPDATE');
        const pipeline = pipelineOf(conn)!;
        pipeline.queue('UPDATE cells SET v = 7 WHERE id IN (1, 2)');
        pipeline.queue(DB.expectRowCount, [3]);
        pipeline.queue('UPDATE cells SET v = 8 WHERE id = 3');
      },
      { retry: ONCE, pipelined: true },
    );
    await expect(work).rejects.toMatchObject({ code: 'ER_SIGNAL_EXCEPTION' });
    expect(await values()).toEqual([0, 0, 0]);
    // The connection went back to the pool with its own query and no transaction open.
    await database.withConnection(async (conn) => {
      expect(pipelineOf(conn)).toBeUndefined();
      const [[row]] = await conn.query<RowDataPacket[]>('SELECT @@in_transaction AS open');
      expect(Number(row!.open)).toBe(0);
    });
  });

  it('sends held statements before any later statement on the connection, in order', async () => {
    await transaction(
      database,
      async (conn) => {
        pipelineOf(conn)!.queue('UPDATE cells SET v = 4 WHERE id = 1');
        const [[row]] = await conn.query<RowDataPacket[]>('SELECT v FROM cells WHERE id = 1');
        expect(Number(row!.v)).toBe(4);
      },
      { retry: ONCE, pipelined: true },
    );
    expect(await values()).toEqual([4, 0, 0]);
  });

  it('keeps a value that carries SQL a value, held back or not: the pool allows multiple statements, placeholders still escape', async () => {
    const evil = "x'; DROP TABLE cells; -- ";
    const seen = await transaction(
      database,
      async (conn) => {
        pipelineOf(conn)!.queue('UPDATE cells SET v = LENGTH(?) WHERE id = 1', [evil]);
        const [[row]] = await conn.query<RowDataPacket[]>('SELECT ? AS s', [evil]);
        return String(row!.s);
      },
      { retry: ONCE, pipelined: true },
    );
    expect(seen).toBe(evil);
    expect(await values()).toEqual([evil.length, 0, 0]);
  });
});
