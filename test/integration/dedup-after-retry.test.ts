/**
 * A create repeated after its task was retried: the backoff moved runAt, but the shop asked for
 * the same thing, so the same body answers 200 (the attack review re-sent a batch of 12 after one
 * failed attempt each and got 10 × 409). The in-process service on real MariaDB; the tasks really
 * run and really fail, through the dispatcher.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/server.js';

let db: TestDatabase;
let service: TestService;

// Each failed attempt moves runAt a minute later: far enough that none runs twice in the test.
const BACKOFF_MS = '60000';

beforeAll(async () => {
  db = await createTestDatabase('dedup_retry');
  const fails = testHandler('fails', async () => {
    throw new Error('the shop is down');
  });
  service = await startTestService(db, { RETRY_BASE_MS: BACKOFF_MS, RETRY_MAX_MS: BACKOFF_MS }, { handlers: [fails] });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
});

/** Waits until every task has failed once and waits for its retry, its runAt moved by the backoff. */
async function allRetried(count: number): Promise<void> {
  await waitFor(async () => {
    const [row] = await db.query<any[]>(
      "SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending' AND attempts = 1 AND run_at > requested_run_at",
    );
    return Number(row.n) === count;
  }, 20_000);
}

const item = (i: number, runAt: string) => ({ type: 'fails', payload: { orderSn: `SN${i}` }, runAt, key: `dedup:${i}` });

describe('a create repeated after a failed attempt', () => {
  it('answers 200 for each item of a batch of 12 re-sent after each task was retried once', async () => {
    const runAt = new Date(Date.now() - 1000).toISOString();
    const batch = { tasks: Array.from({ length: 12 }, (_, i) => item(i, runAt)) };
    const first = await service.call('POST', '/tasks/batch', batch);
    expect(first.status).toBe(200);
    expect(first.body.results.map((r: { status: number }) => r.status)).toEqual(Array(12).fill(201));
    await allRetried(12);

    const again = await service.call('POST', '/tasks/batch', batch);
    const statuses = again.body.results.map((r: { status: number }) => r.status);
    expect(statuses).toEqual(Array(12).fill(200));
    // The same tasks, as they are now: retried, their runAt the backoff's.
    expect(again.body.results.map((r: { id: number }) => r.id)).toEqual(first.body.results.map((r: { id: number }) => r.id));
    const now = await service.call('GET', `/tasks/${again.body.results[0].id}`);
    expect(now.body).toMatchObject({ attempts: 1, status: 'pending' });
    expect(Date.parse(now.body.runAt)).toBeGreaterThan(Date.parse(runAt));
    expect(Number((await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks'))[0].n)).toBe(12);
  });

  it('answers 200 for a single create, and for a delayMs create (the same delay after its creation)', async () => {
    const runAt = new Date(Date.now() - 1000).toISOString();
    expect((await service.call('POST', '/tasks', item(1, runAt))).status).toBe(201);
    const delayed = { type: 'fails', payload: { orderSn: 'D' }, delayMs: 0, key: 'dedup:delay' };
    expect((await service.call('POST', '/tasks', delayed)).status).toBe(201);
    await allRetried(2);

    expect((await service.call('POST', '/tasks', item(1, runAt))).status).toBe(200);
    expect((await service.call('POST', '/tasks', delayed)).status).toBe(200);
    // Other content under the key is still a conflict: a different instant, a different delay.
    expect((await service.call('POST', '/tasks', item(1, new Date(Date.parse(runAt) + 1).toISOString()))).status).toBe(409);
    expect((await service.call('POST', '/tasks', { ...delayed, delayMs: 5 })).status).toBe(409);
  });

  it('compares with the rescheduled instant after a reschedule: the shop asked for it', async () => {
    const runAt = '2030-01-01T00:00:00.000Z';
    const created = await service.call('POST', '/tasks', item(2, runAt));
    const moved = '2030-02-01T00:00:00.000Z';
    expect((await service.call('POST', `/tasks/${created.body.id}/reschedule`, { runAt: moved })).status).toBe(200);
    expect((await service.call('POST', '/tasks', item(2, runAt))).status).toBe(409);
    expect((await service.call('POST', '/tasks', item(2, moved))).status).toBe(200);
  });

  it('compares a row a shop inserted straight (no requested instant) on its run_at', async () => {
    await db.execute("INSERT INTO punctual_tasks (task_key, type, payload, run_at) VALUES ('dedup:straight', 'fails', '{}', '2030-01-01 00:00:00')");
    const body = { type: 'fails', payload: {}, runAt: '2030-01-01T00:00:00Z', key: 'dedup:straight' };
    expect((await service.call('POST', '/tasks', body)).status).toBe(200);
    expect((await service.call('POST', '/tasks', { ...body, runAt: '2030-01-01T00:00:01Z' })).status).toBe(409);
  });
});
