/**
 * Timing bounds of the in-process tests: how late a task runs when the refill arms it, and how
 * close retries keep to their backoff. Measured here, in the serial timing project after every
 * other test, because on a busy machine those bounds say more about the machine than about
 * punctual. The behaviour itself (never early, armed by the refill, backoff at least its delay)
 * is checked in test/integration.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { closeLateness, createShopDatabase, makeOrders } from '../helpers/shop.js';

let db: TestDatabase;
const services: TestService[] = [];
const orders = makeOrders(10, 20, 'TI');
const runs: { id: number; at: number }[] = [];

const alwaysThrow = testHandler('always_throw', async ({ task }) => {
  runs.push({ id: task.id, at: Date.now() });
  throw new Error('boom');
});

async function start(env: Record<string, string> = {}): Promise<TestService> {
  const service = await startTestService(db, { REFILL_INTERVAL_MS: '100', ...env }, { handlers: [alwaysThrow] });
  services.push(service);
  return service;
}

async function lateness(ids: number[]): Promise<number[]> {
  return (await closeLateness(db, ids)).map((row) => row.late);
}

beforeAll(async () => {
  db = await createShopDatabase('timing_in_process', orders);
});

afterEach(async () => {
  await Promise.all(services.splice(0).map((service) => service.stop()));
});

afterAll(async () => {
  await db?.drop();
});

describe('on time, in process', () => {
  it('runs a row a shop inserted by SQL within 100 ms of its time', async () => {
    await start();
    const [result] = await db.pool.query<import('mysql2').ResultSetHeader>(
      "INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('close_order', JSON_OBJECT('orderSn', ?), UTC_TIMESTAMP(3) + INTERVAL 700000 MICROSECOND)",
      [orders[0]!.orderSn],
    );
    await waitFor(async () => !Number.isNaN((await lateness([result.insertId]))[0]), 5000, 'the inserted task to run');
    const [late] = await lateness([result.insertId]);
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(100);
  });

  it('runs tasks the refill armed as they came within the horizon within 100 ms of their time', async () => {
    const service = await start({ HORIZON_MS: '1500' });
    const near = await service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: orders[1]!.orderSn }, delayMs: 1000 });
    const far = await service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: orders[2]!.orderSn }, delayMs: 2500 });
    const ids = [near.body.id as number, far.body.id as number];
    await waitFor(async () => (await lateness(ids)).every((late) => !Number.isNaN(late)), 6000, 'both tasks to run');
    for (const late of await lateness(ids)) {
      expect(late).toBeGreaterThanOrEqual(0);
      expect(late).toBeLessThan(100);
    }
  });

  it('retries within 10% + 150 ms of each backoff', async () => {
    const service = await start({ RETRY_BASE_MS: '200' });
    const { body } = await service.call('POST', '/tasks', { type: 'always_throw', payload: {}, delayMs: 0, maxAttempts: 3 });
    await waitFor(async () => runs.filter((run) => run.id === body.id).length === 3, 10_000, 'three attempts');
    const mine = runs.filter((run) => run.id === body.id);
    const gaps = [mine[1]!.at - mine[0]!.at, mine[2]!.at - mine[1]!.at];
    expect(gaps[0]).toBeGreaterThanOrEqual(200);
    expect(gaps[0]).toBeLessThan(200 * 1.1 + 150);
    expect(gaps[1]).toBeGreaterThanOrEqual(400);
    expect(gaps[1]).toBeLessThan(400 * 1.1 + 150);
    await waitFor(async () => (await service.call('GET', `/tasks/${body.id}`)).body.status === 'failed', 5000, 'the task to fail');
  });
});
