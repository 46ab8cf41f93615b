import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer } from '../helpers/server.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('shutdown');
});

afterAll(async () => {
  await db?.drop();
});

describe('shutdown', () => {
  it('lets a request in flight finish, then does not wait for its idle keep-alive connection', async () => {
    const server = await startServer({ env: { DATABASE_URL: db.url, LOCK_WAIT_TIMEOUT_S: '10' } });
    const agent = new Agent({ keepAliveTimeout: 120_000 });
    const { body } = await server.request('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'S1' }, delayMs: 3_600_000 });
    // Hold the task's row, so a cancel waits on it: a request still in flight when the stop begins.
    const shop = await db.pool.getConnection();
    await shop.query('BEGIN');
    await shop.query('SELECT id FROM tasks WHERE id = ? FOR UPDATE', [body.id]);
    const cancel = request(`${server.baseUrl}/tasks/${body.id}/cancel`, { method: 'POST', dispatcher: agent });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stopAsked = Date.now();
    const exited = server.stop('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await shop.query('COMMIT');
    shop.release();
    const answer = await cancel;
    expect(answer.statusCode).toBe(200);
    expect(((await answer.body.json()) as { status: string }).status).toBe('cancelled');
    expect(await exited).toBe(0);
    expect(Date.now() - stopAsked).toBeLessThan(3000); // not Fastify's 72 s keep-alive
    await agent.close();
  });
});
