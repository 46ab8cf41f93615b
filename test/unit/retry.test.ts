import { describe, expect, it } from 'vitest';
import { backoffMs, retryAt } from '../../src/lifecycle/backoff.js';

describe('retry backoff', () => {
  const policy = { baseMs: 1000, maxMs: 60_000, random: () => 0 };

  it('doubles per attempt from the base, up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((attempts) => backoffMs(policy, attempts))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
    ]);
  });

  it('adds at most 10% jitter', () => {
    expect(backoffMs({ ...policy, random: () => 0.999 }, 1)).toBe(1100);
    expect(backoffMs({ ...policy, random: () => 0.5 }, 2)).toBe(2100);
  });

  it('gives up once the task has used its attempts', () => {
    expect(retryAt(policy, 1, 3, 10_000)).toBe(11_000);
    expect(retryAt(policy, 2, 3, 10_000)).toBe(12_000);
    expect(retryAt(policy, 3, 3, 10_000)).toBeNull();
  });
});

describe('lock conflicts', () => {
  it('include a Galera certification failure at COMMIT, however it is wrapped', async () => {
    const { isLockConflict, isConnectionError } = await import('../../src/db/errors.js');
    const atCommit = Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), {
      errno: 1213,
      code: 'ER_LOCK_DEADLOCK',
    });
    const wsrep = new Error('WSREP detected deadlock/conflict and aborted the transaction. Try restarting the transaction');
    expect(isLockConflict(atCommit)).toBe(true);
    expect(isLockConflict(new Error('Failed query: COMMIT', { cause: wsrep }))).toBe(true);
    expect(isConnectionError(wsrep)).toBe(false);
    // A node outside the primary component: another node can take the work.
    const notReady = Object.assign(new Error('WSREP has not yet prepared node for application use'), {
      errno: 1047,
      code: 'ER_UNKNOWN_COM_ERROR',
    });
    expect(isConnectionError(notReady)).toBe(true);
    expect(isLockConflict(notReady)).toBe(false);
  });
});

describe('a transaction whose connection broke', () => {
  const lost = () =>
    Object.assign(new Error('Connection lost: The server closed the connection.'), { code: 'PROTOCOL_CONNECTION_LOST', fatal: true });

  /** A source of connections that log their statements; `breakOn(sql, round)` says which statement of which try breaks. */
  function source(breakOn: (sql: string, round: number) => boolean) {
    const statements: string[] = [];
    let round = 0;
    return {
      statements,
      withConnection: async <T>(fn: (conn: any) => PromiseLike<T>) => {
        round++;
        const thisRound = round;
        const conn = {
          query: async (options: { sql: string } | string) => {
            const sql = typeof options === 'string' ? options : options.sql;
            statements.push(`${thisRound}:${sql}`);
            if (breakOn(sql, thisRound)) throw lost();
            return [[]];
          },
          destroy: () => undefined,
        };
        return fn(conn);
      },
    };
  }

  it('runs again on another connection when it broke before COMMIT went out: nothing of it was written', async () => {
    const { transaction } = await import('../../src/db/transaction.js');
    const db = source((sql, round) => sql === 'UPDATE x' && round === 1);
    const value = await transaction(db, async (conn) => {
      await conn.query('UPDATE x');
      return 'acked';
    });
    expect(value).toBe('acked');
    expect(db.statements.filter((sql) => sql.endsWith('UPDATE x'))).toEqual(['1:UPDATE x', '2:UPDATE x']);
  });

  it('does not run again when it broke at COMMIT: the COMMIT may have been done', async () => {
    const { transaction } = await import('../../src/db/transaction.js');
    const db = source((sql) => sql === 'COMMIT');
    await expect(transaction(db, async (conn) => conn.query('UPDATE x'))).rejects.toThrow('Connection lost');
    expect(db.statements.filter((sql) => sql.endsWith('UPDATE x'))).toEqual(['1:UPDATE x']);
  });

  it('does not run again when the statement was cut by its own time limit', async () => {
    const { transaction } = await import('../../src/db/transaction.js');
    const cut = Object.assign(new Error('Query execution was interrupted (max_statement_time exceeded)'), {
      code: 'ER_QUERY_INTERRUPTED',
      errno: 1969,
    });
    const statements: string[] = [];
    const db = {
      withConnection: async <T>(fn: (conn: any) => PromiseLike<T>) =>
        fn({
          query: async (options: { sql: string } | string) => {
            const sql = typeof options === 'string' ? options : options.sql;
            statements.push(sql);
            if (sql === 'SELECT slow') throw cut;
            return [[]];
          },
          destroy: () => undefined,
        }),
    };
    await expect(transaction(db, async (conn) => conn.query('SELECT slow'))).rejects.toThrow('interrupted');
    expect(statements.filter((sql) => sql === 'SELECT slow')).toHaveLength(1);
  });
});
