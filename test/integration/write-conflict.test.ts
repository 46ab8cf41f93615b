/**
 * A request that loses to a concurrent write through every try answers 503 PUNCTUAL_WRITE_CONFLICT
 * with Retry-After, writes nothing, and passes when sent again (db/errors.ts isLockConflict,
 * http/errors.ts). The conflict here is a real one: the test's own transaction holds the unique
 * entry of a key, uncommitted, so the service's INSERT of that key waits for its lock until
 * LOCK_WAIT_TIMEOUT_S runs out, on every try.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService;

beforeAll(async () => {
  db = await createTestDatabase('write_conflict');
  service = await startTestService(db, { LOCK_WAIT_TIMEOUT_S: '1' });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('a write lost to a concurrent one', () => {
  it('answers 503 PUNCTUAL_WRITE_CONFLICT with Retry-After, writes nothing, and passes once the other write is gone', async () => {
    const body = { type: 'close_order', payload: { orderSn: 'SN-CONFLICT' }, delayMs: 60_000, key: 'conflict-1' };
    const holder: mysql.PoolConnection = await db.pool.getConnection();
    try {
      await holder.query('BEGIN');
      await holder.query(
        "INSERT INTO punctual_tasks (type, payload, run_at, task_key) VALUES ('close_order', '{}', UTC_TIMESTAMP(3), 'conflict-1')",
      );
      const response = await service.app.inject({ method: 'POST', url: '/tasks', payload: body });
      expect(response.statusCode).toBe(503);
      expect(response.headers['retry-after']).toBe('1');
      expect(response.json()).toMatchObject({ code: 'PUNCTUAL_WRITE_CONFLICT' });
      expect(response.json().message).toContain('try again');
      expect(service.logs.filter((line) => line.msg === 'request failed: lost to a concurrent write')).toHaveLength(1);
      await holder.query('ROLLBACK');
    } finally {
      holder.release();
    }
    const [rows] = await db.pool.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE task_key = 'conflict-1'");
    expect(Number(rows[0]!.n)).toBe(0);

    const again = await service.call('POST', '/tasks', body);
    expect(again.status).toBe(201);
    const [after] = await db.pool.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE task_key = 'conflict-1'");
    expect(Number(after[0]!.n)).toBe(1);
  }, 60_000);
});
