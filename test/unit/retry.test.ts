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
