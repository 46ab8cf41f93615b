/**
 * The transaction runner's decisions against MariaDB: which errors run the work again (a real
 * deadlock, a real lock-wait timeout, a migration's "table exists"), how many times, that any
 * other error goes up at once, and that a try that failed leaves nothing behind. Each try writes
 * a row keyed by its number, so the table tells which tries committed.
 */
import type { PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { lockConflicts, ranElsewhere } from '../../src/db/retry.js';
import { autocommit, DEFAULT_TRIES, transaction } from '../../src/db/transaction.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

let db: TestDatabase;
/** Row locks are waited for 1 s. */
let database: Database;
/** Another session of the test's, holding locks. */
let other: PoolConnection | undefined;

async function committedTries(): Promise<number[]> {
  return (await db.query<({ n: number } & RowDataPacket)[]>('SELECT n FROM tries ORDER BY n')).map((row) => Number(row.n));
}

/** `other` holds the lock of cell `id` (in an open transaction). */
async function holdCell(id: number): Promise<PoolConnection> {
  other = await db.pool.getConnection();
  await other.query('BEGIN');
  await other.query('SELECT v FROM cells WHERE id = ? FOR UPDATE', [id]);
  return other;
}

/** Waits until a statement starting with `prefix` waits in the server. */
function waiting(prefix: string) {
  return waitFor(
    async () => {
      const [row] = await db.query<({ n: number } & RowDataPacket)[]>(
        'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE ?',
        [`${prefix}%`],
      );
      return Number(row!.n) > 0 || undefined;
    },
    5000,
    `${prefix} to wait for its lock`,
  );
}

beforeAll(async () => {
  db = await createTestDatabase('transaction');
  database = new Database({ url: db.url, poolSize: 4, lockWaitTimeoutS: 1 });
  await db.execute('CREATE TABLE cells (id INT PRIMARY KEY, v INT NOT NULL)');
  await db.execute('CREATE TABLE tries (n INT PRIMARY KEY)');
  await db.execute('INSERT INTO cells (id, v) VALUES ?', [Array.from({ length: 200 }, (_, i) => [i + 1, 0])]);
});

afterEach(async () => {
  if (other !== undefined) {
    await other.query('ROLLBACK').catch(() => undefined);
    other.release();
    other = undefined;
  }
  await db.execute('DELETE FROM tries');
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

describe('the transaction runner', () => {
  it('runs a deadlock victim again from the start; only the try that committed leaves its row', async () => {
    // The other session is the heavier transaction, so InnoDB picks the runner's as the victim.
    const shop = await db.pool.getConnection();
    other = shop;
    await shop.query('BEGIN');
    await shop.query('UPDATE cells SET v = v + 1 WHERE id > 2');
    await shop.query('SELECT v FROM cells WHERE id = 2 FOR UPDATE');
    const tries: number[] = [];
    const work = transaction(database, async (conn) => {
      const n = tries.push(tries.length + 1);
      await conn.query('INSERT INTO tries (n) VALUES (?)', [n]);
      await conn.query('SELECT v FROM cells WHERE id = 1 FOR UPDATE');
      await conn.query('SELECT v FROM cells WHERE id = 2 FOR UPDATE');
      return n;
    });
    await waiting('SELECT v FROM cells WHERE id = 2');
    // The other session now wants cell 1, which the runner's first try holds: a deadlock.
    await shop.query('SELECT v FROM cells WHERE id = 1 FOR UPDATE');
    await shop.query('COMMIT');
    expect(await work).toBe(2);
    expect(tries).toEqual([1, 2]);
    expect(await committedTries()).toEqual([2]);
  });

  it('runs a lock-wait timeout again, as often as the policy says', async () => {
    const holder = await holdCell(3);
    let calls = 0;
    const value = await transaction(
      database,
      async (conn) => {
        calls++;
        await conn.query('INSERT INTO tries (n) VALUES (?)', [calls]);
        await conn.query('SELECT v FROM cells WHERE id = 3 FOR UPDATE');
        return calls;
      },
      {
        // The lock goes before the third try.
        retry: lockConflicts(3, (_error, round) => {
          if (round === 2) void holder.query('ROLLBACK');
        }),
      },
    );
    expect(value).toBe(3);
    expect(await committedTries()).toEqual([3]);
  });

  it(`gives up after ${DEFAULT_TRIES} tries by default, with the lock-wait timeout, and leaves nothing`, async () => {
    await holdCell(4);
    let calls = 0;
    const work = transaction(database, async (conn) => {
      calls++;
      await conn.query('INSERT INTO tries (n) VALUES (?)', [calls]);
      await conn.query('SELECT v FROM cells WHERE id = 4 FOR UPDATE');
    });
    await expect(work).rejects.toMatchObject({ errno: 1205 });
    expect(calls).toBe(DEFAULT_TRIES);
    expect(await committedTries()).toEqual([]);
  }, 20_000);

  it('lets any other error go up at once, the callback’s writes rolled back', async () => {
    let calls = 0;
    const boom = transaction(database, async (conn) => {
      calls++;
      await conn.query('INSERT INTO tries (n) VALUES (1)');
      throw new Error('boom');
    });
    await expect(boom).rejects.toThrow('boom');
    expect(calls).toBe(1);
    // An error of the database that is not a lock conflict: a duplicate key.
    const duplicate = transaction(database, async (conn) => {
      calls++;
      await conn.query('INSERT INTO tries (n) VALUES (2)');
      await conn.query('INSERT INTO tries (n) VALUES (2)');
    });
    await expect(duplicate).rejects.toMatchObject({ errno: 1062 });
    expect(calls).toBe(2);
    expect(await committedTries()).toEqual([]);
    // The connections went back to the pool usable: the next transaction commits.
    await transaction(database, (conn) => conn.query('INSERT INTO tries (n) VALUES (3)'));
    expect(await committedTries()).toEqual([3]);
  });

  it('in autocommit, keeps what each statement wrote when a later one fails', async () => {
    let calls = 0;
    const work = autocommit(database, async (conn) => {
      calls++;
      await conn.query('INSERT INTO tries (n) VALUES (1)');
      throw new Error('boom');
    });
    await expect(work).rejects.toThrow('boom');
    expect(calls).toBe(1);
    expect(await committedTries()).toEqual([1]);
  });

  it('runs a migration again when another process created its table first, and only then', async () => {
    let calls = 0;
    await autocommit(
      database,
      async (conn) => {
        calls++;
        // The first try meets a table "another process" made: 1050, table exists.
        if (calls === 1) await conn.query('CREATE TABLE tries (n INT PRIMARY KEY)');
        await conn.query('INSERT INTO tries (n) VALUES (?)', [calls]);
      },
      { retry: ranElsewhere(10_000) },
    );
    expect(calls).toBe(2);
    expect(await committedTries()).toEqual([2]);
    // Another error is no reason to run a migration again.
    calls = 0;
    const broken = autocommit(
      database,
      async (conn) => {
        calls++;
        await conn.query('CREATE TABLE nowhere.t (n INT)');
      },
      { retry: ranElsewhere(10_000) },
    );
    await expect(broken).rejects.toMatchObject({ errno: 1049 });
    expect(calls).toBe(1);
  });
});
