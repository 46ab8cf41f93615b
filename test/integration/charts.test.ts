/**
 * The charts' data over HTTP against MariaDB: upcoming load counted by type in the minute and
 * hour it falls due (and nothing that is not pending), the overdue count, the cache, and the
 * recent runs as the ring recorded them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/time/clock.js';
import { SQL } from '../../src/store/sql/tasks.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
// A fixed "now" 25 s into 02:17 UTC: buckets start at 02:17 (minutes) and 02:00 (hours).
const NOW = Date.UTC(2030, 5, 1, 2, 17, 25);
let now = NOW;
const clock: Clock = { now: () => now };
let db: TestDatabase;
let service: TestService;

beforeAll(async () => {
  db = await createTestDatabase('charts_http');
  service = await startTestService(db, {}, { clock, boot: false });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

const at = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

describe('GET /charts/upcoming', () => {
  it('counts pending tasks by type in the minute and the hour they fall due', async () => {
    const rows: [string, number, string][] = [
      ['close_order', NOW - 5 * MINUTE, 'pending'], // overdue
      ['close_order', NOW - 2 * HOUR, 'pending'], // overdue
      ['close_order', Date.UTC(2030, 5, 1, 2, 16, 59, 999), 'pending'], // overdue, by a millisecond
      ['close_order', Date.UTC(2030, 5, 1, 2, 17, 0), 'pending'], // 02:17, the minute chart's first bucket
      ['close_order', Date.UTC(2030, 5, 1, 3, 17, 0), 'pending'], // 03:17, past the minute chart: hour 03:00
      ['close_order', NOW + 3 * MINUTE, 'pending'], // 02:20
      ['close_order', NOW + 3 * MINUTE + 20_000, 'pending'], // 02:20
      ['webhook', NOW + 3 * MINUTE, 'pending'], // 02:20
      ['webhook', NOW + 50 * MINUTE, 'pending'], // 03:07, the minute chart's 50th bucket
      ['webhook', NOW + 3 * MINUTE, 'done'], // not pending: not counted
      ['close_order', NOW + 3 * MINUTE, 'cancelled'],
      ['close_order', NOW + 2 * HOUR, 'pending'], // hour 04:00
      ['webhook', Date.UTC(2030, 5, 8, 1, 59, 59), 'pending'], // the last hour of the 7 days
      ['webhook', Date.UTC(2030, 5, 8, 2, 0, 0), 'pending'], // past the 7 days
    ];
    for (const [type, runAt, status] of rows) {
      await db.execute('INSERT INTO punctual_tasks (type, payload, run_at, status) VALUES (?, ?, ?, ?)', [type, '{}', at(runAt), status]);
    }
    const { status, body } = await service.call('GET', '/charts/upcoming');
    expect(status).toBe(200);
    expect(body.countedAt).toBe(new Date(NOW).toISOString());
    expect(body.overdue).toBe(3);
    expect(body.minutes.start).toBe('2030-06-01T02:17:00.000Z');
    expect(body.minutes.stepMs).toBe(MINUTE);
    expect(Object.keys(body.minutes.byType).sort()).toEqual(['close_order', 'webhook']);
    const nonZero = (counts: number[]) => Object.fromEntries(counts.flatMap((n, i) => (n === 0 ? [] : [[i, n]])));
    expect(nonZero(body.minutes.byType.close_order)).toEqual({ 0: 1, 3: 2 });
    expect(nonZero(body.minutes.byType.webhook)).toEqual({ 3: 1, 50: 1 });
    expect(body.hours.start).toBe('2030-06-01T02:00:00.000Z');
    expect(body.hours.byType.close_order).toHaveLength(168);
    expect(nonZero(body.hours.byType.close_order)).toEqual({ 0: 3, 1: 1, 2: 1 });
    expect(nonZero(body.hours.byType.webhook)).toEqual({ 0: 1, 1: 1, 167: 1 });
  });

  it('reads the window from one index alone, in its order: no row, no temporary table, no sort', async () => {
    const [plan] = await db.query<any[]>(`EXPLAIN ${SQL.upcomingLoad}`, [
      ['close_order', 'webhook'],
      NOW / MINUTE,
      NOW / MINUTE + 168 * 60,
    ]);
    expect(plan).toMatchObject({ table: 'punctual_tasks', type: 'range', key: 'tasks_type_status_run_minute_run_at' });
    expect(plan.Extra).toContain('Using index');
    expect(plan.Extra).not.toMatch(/temporary|filesort/);
  });

  it('answers from its cache for a few seconds, then counts again', async () => {
    await db.execute('INSERT INTO punctual_tasks (type, payload, run_at) VALUES (?, ?, ?)', ['close_order', '{}', at(NOW + 10 * MINUTE)]);
    now = NOW + 1000;
    const cached = (await service.call('GET', '/charts/upcoming')).body;
    expect(cached.countedAt).toBe(new Date(NOW).toISOString());
    now = NOW + 6000; // stale: this answer is the old count, and a new count starts
    await service.call('GET', '/charts/upcoming');
    const fresh = await waitFor(
      async () => {
        const { body } = await service.call('GET', '/charts/upcoming');
        return body.countedAt !== cached.countedAt && body;
      },
      10_000,
      'the new count',
    );
    expect(fresh.countedAt).toBe(new Date(NOW + 6000).toISOString());
    expect(fresh.minutes.byType.close_order[10]).toBe(1);
  });
});

describe('GET /charts/recent', () => {
  it('gives the last hour of runs per 10 s slot, as recorded', async () => {
    // now is 02:17:31: these start in the 02:17:30 slot, 10, 20 and 30 ms late.
    service.runMetrics.recordRun('close_order', 'done', now - 600, now - 590, 5);
    service.runMetrics.recordRun('close_order', 'retry', now - 600, now - 580, 5);
    service.runMetrics.recordRun('webhook', 'failed', now - 600, now - 570, 5);
    const { status, body } = await service.call('GET', '/charts/recent');
    expect(status).toBe(200);
    expect(body.slotMs).toBe(10_000);
    expect(body.done).toHaveLength(360);
    expect([body.done.at(-1), body.retries.at(-1), body.failures.at(-1)]).toEqual([1, 1, 1]);
    expect(body.latenessP50Ms.at(-1)).toBeGreaterThanOrEqual(20);
    expect(body.latenessP50Ms.at(-1)).toBeLessThanOrEqual(21); // buckets are 5 % wide
    expect(body.latenessP99Ms.at(-1)).toBe(30);
    expect(body.latenessP99Ms.at(-2)).toBeNull();
  });
});
