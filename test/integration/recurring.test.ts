/**
 * Recurring tasks, driven day by day with a clock the test moves: each occurrence runs once,
 * writes the next in its own completion transaction, and the series survives a restart.
 */
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/time/clock.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService | undefined;

/** Real time shifted by `offset`: the test jumps it to just before each occurrence. */
const clock: Clock & { offset: number } = { offset: 0, now: () => Date.now() + clock.offset };

/** Records each run with the time it was due. */
const nightly = testHandler('nightly', async ({ tx, task }) => {
  await tx.execute(sql`INSERT INTO runs (task_id, run_at) VALUES (${task.id}, ${new Date(task.runAt)})`);
});
const breaks = testHandler('breaks', async () => {
  throw new PermanentError('the reset job is broken');
});

async function start(): Promise<TestService> {
  service = await startTestService(db, { REFILL_INTERVAL_MS: '50', TIMEZONE: 'Asia/Shanghai' }, { clock, handlers: [nightly, breaks] });
  return service;
}

/** The pending occurrence of series `first`, or undefined. */
async function pendingOf(first: number): Promise<{ id: number; runAt: number } | undefined> {
  const rows = await db.query<any[]>("SELECT id, run_at FROM punctual_tasks WHERE status = 'pending' AND (id = ? OR series_id = ?)", [first, first]);
  expect(rows.length).toBeLessThanOrEqual(1);
  return rows[0] === undefined ? undefined : { id: Number(rows[0].id), runAt: rows[0].run_at.getTime() };
}

/** Moves the clock to 100 ms before the series' pending occurrence and waits until it ran. */
async function runNextOccurrence(first: number): Promise<number> {
  const next = (await pendingOf(first))!;
  clock.offset = next.runAt - 100 - Date.now();
  await waitFor(
    async () => {
      const [row] = await db.query<any[]>('SELECT status FROM punctual_tasks WHERE id = ?', [next.id]);
      return row.status !== 'pending';
    },
    5000,
    `occurrence ${next.id}`,
  );
  return next.runAt;
}

beforeAll(async () => {
  db = await createTestDatabase('recurring');
  await db.execute('CREATE TABLE runs (task_id BIGINT NOT NULL, run_at DATETIME(3) NOT NULL)');
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  clock.offset = 0;
});

afterAll(async () => {
  await db?.drop();
});

describe('recurring tasks', () => {
  it('runs every day at 00:00 Asia/Shanghai, once a day, through a restart', async () => {
    clock.offset = Date.parse('2026-11-29T12:00:00Z') - Date.now();
    await start();
    const created = await service!.call('POST', '/tasks', {
      type: 'nightly',
      payload: {},
      cron: '0 0 * * *',
      key: 'members:nightly-reset',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      cron: '0 0 * * *',
      timezone: 'Asia/Shanghai',
      runAtLocal: '2026-11-30T00:00:00.000+08:00',
      seriesId: null,
    });
    const first = created.body.id as number;

    const ran = [await runNextOccurrence(first), await runNextOccurrence(first)];
    // A deploy in the middle of the series: the next occurrence is a row, the new process arms it.
    await service!.stop();
    await start();
    ran.push(await runNextOccurrence(first), await runNextOccurrence(first));

    const local = ran.map((at) => new Date(at + 8 * 3600_000).toISOString().replace('Z', '+08:00'));
    expect(local).toEqual([
      '2026-11-30T00:00:00.000+08:00',
      '2026-12-01T00:00:00.000+08:00',
      '2026-12-02T00:00:00.000+08:00',
      '2026-12-03T00:00:00.000+08:00',
    ]);
    const runs = await db.query<any[]>('SELECT run_at, COUNT(*) AS n FROM runs GROUP BY run_at ORDER BY run_at');
    expect(runs.map((row) => [row.run_at.getTime(), Number(row.n)])).toEqual(ran.map((at) => [at, 1]));
    const next = (await pendingOf(first))!;
    expect(new Date(next.runAt).toISOString()).toBe('2026-12-03T16:00:00.000Z');
    const occurrence = await service!.call('GET', `/tasks/${next.id}`);
    expect(occurrence.body).toMatchObject({ seriesId: first, cron: '0 0 * * *', key: null, status: 'pending' });

    // Cancelling by the series' key stops it: the pending occurrence is cancelled, no next one comes.
    const cancelled = await service!.call('POST', '/tasks/by-key/members:nightly-reset/cancel');
    expect(cancelled.body).toMatchObject({ id: next.id, status: 'cancelled' });
    expect(await pendingOf(first)).toBeUndefined();
  });

  it('follows New York across both DST changes without skipping or doubling a day', async () => {
    clock.offset = Date.parse('2026-03-06T12:00:00Z') - Date.now();
    await start();
    const spring = await service!.call('POST', '/tasks', {
      type: 'nightly',
      payload: {},
      cron: '30 2 * * *',
      timezone: 'America/New_York',
    });
    const springRuns = [];
    for (let day = 0; day < 4; day++) springRuns.push(await runNextOccurrence(spring.body.id));
    const local = (at: number) => new Date(at).toISOString();
    expect(springRuns.map(local)).toEqual([
      '2026-03-07T07:30:00.000Z', // 02:30 EST
      '2026-03-08T07:30:00.000Z', // 03:30 EDT: 02:30 does not exist that day
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
      '2026-03-10T06:30:00.000Z',
    ]);
    await service!.call('POST', `/tasks/${(await pendingOf(spring.body.id))!.id}/cancel`);

    clock.offset = Date.parse('2026-10-30T12:00:00Z') - Date.now();
    const fall = await service!.call('POST', '/tasks', { type: 'nightly', payload: {}, cron: '30 1 * * *', timezone: 'America/New_York' });
    const fallRuns = [];
    for (let day = 0; day < 4; day++) fallRuns.push(await runNextOccurrence(fall.body.id));
    expect(fallRuns.map(local)).toEqual([
      '2026-10-31T05:30:00.000Z', // 01:30 EDT
      '2026-11-01T05:30:00.000Z', // 01:30 EDT, once, though 01:30 happens twice that day
      '2026-11-02T06:30:00.000Z', // 01:30 EST
      '2026-11-03T06:30:00.000Z',
    ]);
  });

  it('goes on after an occurrence fails for good', async () => {
    clock.offset = Date.parse('2026-11-29T12:00:00Z') - Date.now();
    await start();
    const created = await service!.call('POST', '/tasks', { type: 'breaks', payload: {}, cron: '0 0 * * *' });
    const failedAt = await runNextOccurrence(created.body.id);
    const [failed] = await db.query<any[]>('SELECT status, last_error FROM punctual_tasks WHERE id = ?', [created.body.id]);
    expect(failed).toMatchObject({ status: 'failed', last_error: 'the reset job is broken' });
    expect((await pendingOf(created.body.id))!.runAt).toBe(failedAt + 24 * 3600_000);
  });

  it('refuses a cron expression it cannot follow', async () => {
    await start();
    for (const [cron, message] of [
      ['0 0 * * * *', 'body/cron must have five fields'],
      ['0 0 30 2 *', 'body/cron never matches'],
      ['0 25 * * *', 'body/cron is not a cron expression'],
    ]) {
      const answer = await service!.call('POST', '/tasks', { type: 'nightly', payload: {}, cron });
      expect(answer.status).toBe(400);
      expect(answer.body.message).toContain(message);
    }
  });
});

describe('retrying a failed task', () => {
  it('puts it back to pending with its attempts reset, now or at the time given', async () => {
    await start();
    const created = await service!.call('POST', '/tasks', { type: 'breaks', payload: {}, delayMs: 0, maxAttempts: 2 });
    await waitFor(async () => (await service!.call('GET', `/tasks/${created.body.id}`)).body.status === 'failed');
    const retried = await service!.call('POST', `/tasks/${created.body.id}/retry`, { delayMs: 60_000 });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'pending', attempts: 0, finishedAt: null, lastError: 'the reset job is broken' });
    expect(Date.parse(retried.body.runAt)).toBeGreaterThan(clock.now() + 59_000);
    expect(service!.timers.has(created.body.id)).toBe(true);
    const again = await service!.call('POST', `/tasks/${created.body.id}/retry`);
    expect(again.status).toBe(409);
    expect(again.body.message).toContain('only a failed task can be retried');

    await service!.call('POST', `/tasks/${created.body.id}/reschedule`, { delayMs: 0 });
    await waitFor(async () => (await service!.call('GET', `/tasks/${created.body.id}`)).body.status === 'failed');
    const now = await service!.call('POST', `/tasks/${created.body.id}/retry`);
    expect(Math.abs(Date.parse(now.body.runAt) - clock.now())).toBeLessThan(1000);
  });
});
