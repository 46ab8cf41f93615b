import { connect } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor } from '../helpers/server.js';

let db: TestDatabase;

/** Whether a new connection to the server's port is taken (false once it stopped listening). */
function accepts(baseUrl: string): Promise<boolean> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Statements on this database's tasks that have been waiting for over 300 ms, the shop's own
 * connection aside: the cancel, held by the shop's row lock. PROCESSLIST is read live, where
 * INNODB_TRX is a cached snapshot that can miss a lock wait entirely.
 */
async function waitingStatements(shopId: number): Promise<number> {
  const [row] = await db.query<any[]>(
    `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
      WHERE DB = ? AND ID NOT IN (?, CONNECTION_ID()) AND COMMAND = 'Query' AND TIME_MS > 300 AND INFO LIKE '%tasks%'`,
    [db.name, shopId],
  );
  return Number(row.n);
}

beforeAll(async () => {
  db = await createTestDatabase('shutdown');
});

afterAll(async () => {
  await db?.drop();
});

describe('shutdown', () => {
  it('lets a request in flight finish, then does not wait for its idle keep-alive connection', async () => {
    const server = await startServer({ env: { DATABASE_URL: db.url, LOCK_WAIT_TIMEOUT_S: '30', STOP_TIMEOUT_MS: '60000' } });
    const agent = new Agent({ keepAliveTimeout: 120_000 });
    const { body } = await server.request('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'S1' }, delayMs: 3_600_000 });
    // Hold the task's row, so a cancel waits on it: a request still in flight when the stop begins.
    const shop = await db.pool.getConnection();
    await shop.query('BEGIN');
    await shop.query('SELECT id FROM punctual_tasks WHERE id = ? FOR UPDATE', [body.id]);
    const [[{ shopId }]] = await shop.query<any[]>('SELECT CONNECTION_ID() AS shopId');
    const cancel = request(`${server.baseUrl}/tasks/${body.id}/cancel`, { method: 'POST', dispatcher: agent });
    await waitFor(async () => (await waitingStatements(shopId)) === 1, 10_000, 'the cancel to wait for the row');
    const stopAsked = Date.now();
    const exited = server.stop('SIGTERM');
    // The stop has begun (no new connections) while the cancel still waits for the row.
    await waitFor(async () => !(await accepts(server.baseUrl)), 10_000, 'the server to stop listening');
    expect(await waitingStatements(shopId)).toBe(1);
    await shop.query('COMMIT');
    shop.release();
    const answer = await cancel;
    expect(answer.statusCode).toBe(200);
    expect(((await answer.body.json()) as { status: string }).status).toBe('cancelled');
    expect(await exited).toBe(0);
    // Neither Fastify's 72 s keep-alive nor the 60 s stop timeout's cut: the idle connection closed at once.
    expect(Date.now() - stopAsked).toBeLessThan(20_000);
    await agent.close();
  });
});
