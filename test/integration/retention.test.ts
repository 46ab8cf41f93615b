/**
 * Retention against MariaDB: old finished tasks go, in batches of RETENTION_BATCH_SIZE; pending,
 * running and recent ones stay; failed ones stay longer; a recurring series keeps its first task
 * (its key) and its occurrence to come, and goes on running; two sweeps at once delete each row
 * once; a stop in the middle of a sweep ends it at once.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const DAY = 24 * 3600_000;
let db: TestDatabase;
const services: TestService[] = [];

/** A task row written straight into the table, finished `ageMs` ago (or unfinished). */
async function insert(
  status: string,
  ageMs: number | null,
  extra: { cron?: string; seriesId?: number; key?: string; runAt?: number } = {},
) {
  const result = await db.execute(
    `INSERT INTO punctual_tasks (task_key, type, payload, run_at, status, finished_at, cron, series_id)
     VALUES (?, 'tick', '{}', ?, ?, ?, ?, ?)`,
    [
      extra.key ?? null,
      new Date(extra.runAt ?? Date.now() - (ageMs ?? 0) - 1000),
      status,
      ageMs === null ? null : new Date(Date.now() - ageMs),
      extra.cron ?? null,
      extra.seriesId ?? null,
    ],
  );
  return result.insertId;
}

async function ids(): Promise<number[]> {
  return (await db.query<any[]>('SELECT id FROM punctual_tasks ORDER BY id')).map((row) => Number(row.id));
}

async function deletedMetric(service: TestService, status: string): Promise<number> {
  const text = await service.metrics.registry.metrics();
  return parsePrometheus(text).get(`punctual_retention_deleted_total{status="${status}"}`) ?? 0;
}

async function start(env: Record<string, string>): Promise<TestService> {
  const service = await startTestService(
    db,
    { RETENTION_INTERVAL_MS: String(24 * 3600_000), ...env },
    { handlers: [testHandler('tick', async () => undefined)] },
  );
  services.push(service);
  return service;
}

beforeAll(async () => {
  db = await createTestDatabase('retention');
});

afterEach(async () => {
  await Promise.all(services.splice(0).map((service) => service.stop()));
  await db.execute('DELETE FROM punctual_tasks');
});

afterAll(async () => {
  await db?.drop();
});

describe('retention', () => {
  it('deletes old done, cancelled and skipped tasks in batches, and leaves pending, running and recent ones', async () => {
    const service = await start({
      RETENTION_MS: String(7 * DAY),
      FAILED_RETENTION_MS: String(30 * DAY),
      RETENTION_BATCH_SIZE: '3',
      RETENTION_PAUSE_MS: '0',
    });
    const keep = [
      await insert('pending', null, { runAt: Date.now() + DAY }),
      await insert('pending', null, { runAt: Date.now() - 40 * DAY }), // overdue, never finished
      await insert('running', null),
      await insert('done', 6 * DAY),
      await insert('cancelled', 1000),
      await insert('skipped', 6.9 * DAY),
      await insert('failed', 8 * DAY), // failed is kept longer
      await insert('failed', 29 * DAY),
    ];
    const old = { done: 7, cancelled: 2, skipped: 1, failed: 1 };
    for (let i = 0; i < old.done; i++) await insert('done', 7 * DAY + 60_000 + i);
    for (let i = 0; i < old.cancelled; i++) await insert('cancelled', 100 * DAY);
    await insert('skipped', 8 * DAY);
    await insert('failed', 31 * DAY);

    const result = await service.retention.sweep();
    expect(result).toEqual({ deleted: old, audit: 0, batches: 3 + 1 + 1 + 1, stopped: false });
    expect(await ids()).toEqual(keep);
    for (const [status, count] of Object.entries(old)) expect(await deletedMetric(service, status)).toBe(count);

    // A second sweep finds nothing and counts nothing.
    expect(await service.retention.sweep()).toEqual({
      deleted: { done: 0, cancelled: 0, skipped: 0, failed: 0 },
      audit: 0,
      batches: 0,
      stopped: false,
    });
    expect(await deletedMetric(service, 'done')).toBe(old.done);
  });

  it('keeps everything of a status whose retention is 0', async () => {
    const service = await start({ RETENTION_MS: '0', FAILED_RETENTION_MS: String(DAY) });
    const done = await insert('done', 1000 * DAY);
    await insert('failed', 2 * DAY);
    expect((await service.retention.sweep()).deleted).toEqual({ done: 0, cancelled: 0, skipped: 0, failed: 1 });
    expect(await ids()).toEqual([done]);
  });

  it('keeps a recurring series going: its first task (and key) stays while an occurrence is to come', async () => {
    const service = await start({ RETENTION_MS: String(DAY), RETENTION_BATCH_SIZE: '2', RETENTION_PAUSE_MS: '0' });
    const head = await insert('done', 10 * DAY, { cron: '0 3 * * *', key: 'series:nightly' });
    const oldRuns = [
      await insert('done', 9 * DAY, { cron: '0 3 * * *', seriesId: head }),
      await insert('failed', 8 * DAY, { cron: '0 3 * * *', seriesId: head }),
    ];
    // The occurrence to come is due now, so the service runs it after the sweep.
    const next = await insert('pending', null, { cron: '0 3 * * *', seriesId: head, runAt: Date.now() + 1500 });
    // A series that ended (its last occurrence cancelled) keeps nothing.
    const endedHead = await insert('done', 10 * DAY, { cron: '0 4 * * *', key: 'series:ended' });
    const endedRun = await insert('cancelled', 9 * DAY, { cron: '0 4 * * *', seriesId: endedHead });

    const result = await service.retention.sweep();
    expect(result.deleted).toEqual({ done: 2, cancelled: 1, skipped: 0, failed: 0 });
    const left = await ids();
    expect(left).toEqual([head, oldRuns[1], next]);
    expect(left).not.toContain(endedHead);
    expect(left).not.toContain(endedRun);

    // The key still finds the series, and the next occurrence follows the one that runs now.
    expect((await service.call('GET', '/tasks/by-key/series%3Anightly')).body.id).toBe(head);
    await service.scheduler.refill();
    const following = await waitFor(
      async () => {
        const rows = await db.query<any[]>("SELECT id, series_id FROM punctual_tasks WHERE status = 'pending'");
        return rows.length === 1 && Number(rows[0].id) !== next ? rows[0] : undefined;
      },
      10_000,
      'the next occurrence',
    );
    expect(Number(following.series_id)).toBe(head);
    // Cancelling by the series' key cancels that occurrence: the series' references hold.
    const cancelled = await service.call('POST', '/tasks/by-key/series%3Anightly/cancel');
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.id).toBe(Number(following.id));
  });

  it('deletes each row once when two processes sweep at the same time', async () => {
    const env = { RETENTION_MS: String(DAY), RETENTION_BATCH_SIZE: '5', RETENTION_PAUSE_MS: '0' };
    const [a, b] = [await start(env), await start(env)];
    for (let i = 0; i < 60; i++) await insert(i % 2 === 0 ? 'done' : 'cancelled', 2 * DAY);
    const [ra, rb] = await Promise.all([a.retention.sweep(), b.retention.sweep()]);
    expect(ra.deleted.done + rb.deleted.done).toBe(30);
    expect(ra.deleted.cancelled + rb.deleted.cancelled).toBe(30);
    expect((await deletedMetric(a, 'done')) + (await deletedMetric(b, 'done'))).toBe(30);
    expect(await ids()).toEqual([]);
  });

  it('stops in the middle of a sweep at once, between two batches', async () => {
    const service = await start({ RETENTION_MS: String(DAY), RETENTION_BATCH_SIZE: '2', RETENTION_PAUSE_MS: '60000' });
    for (let i = 0; i < 6; i++) await insert('done', 2 * DAY);
    const sweep = service.retention.sweep();
    await waitFor(async () => (await ids()).length === 4, 10_000, 'the first batch');
    const started = Date.now();
    await service.stop();
    const stopMs = Date.now() - started;
    expect(await sweep).toEqual({ deleted: { done: 2, cancelled: 0, skipped: 0, failed: 0 }, audit: 0, batches: 1, stopped: true });
    expect(stopMs).toBeLessThan(3000);
    expect((await ids()).length).toBe(4);
  });
});
