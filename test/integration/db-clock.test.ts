/**
 * The database clock check against the real MariaDB: punctual's clock is the Clock seam, so the
 * test moves it ahead of the server's and reads the offset back from /metrics, /readyz and the
 * log, at boot and after a reconcile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService | undefined;

async function offsetMetric(): Promise<number> {
  const text = (await service!.app.inject({ url: '/metrics' })).body;
  return parsePrometheus(text).get('punctual_db_clock_offset_seconds')!;
}

beforeAll(async () => {
  db = await createTestDatabase('db_clock');
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('the database clock check', () => {
  it('measures a clock that agrees as agreeing, and says nothing', async () => {
    service = await startTestService(db);
    // Same machine: the clocks are the same; the measurement's own error is half a round trip.
    expect(Math.abs(await offsetMetric())).toBeLessThan(0.05);
    const ready = await service.call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(Math.abs(ready.body.dbClockOffsetMs)).toBeLessThan(50);
    expect(ready.body.warning).toBeUndefined();
    expect(service.logs.filter((line) => line.level === 40 && 'dbClockOffsetMs' in line)).toEqual([]);
    await service.stop();
    service = undefined;
  });

  it('measures punctual 500 ms ahead as the database 500 ms behind, warns, and stays ready', async () => {
    let skewMs = 500;
    service = await startTestService(db, {}, { clock: { now: () => Date.now() + skewMs } });
    // Measured at boot.
    expect(await offsetMetric()).toBeGreaterThan(-0.55);
    expect(await offsetMetric()).toBeLessThan(-0.45);
    const ready = await service.call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ready');
    expect(ready.body.dbClockOffsetMs).toBeGreaterThan(-550);
    expect(ready.body.dbClockOffsetMs).toBeLessThan(-450);
    expect(ready.body.warning).toMatch(
      /^the database clock is \d+ ms behind punctual's: tasks inserted with NOW\(3\) or UTC_TIMESTAMP\(3\) fire that much early$/,
    );
    const warned = service.logs.filter((line) => line.level === 40 && 'dbClockOffsetMs' in line);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toBe(ready.body.warning);

    // Measured again at every reconcile: the skew gone, the warning goes.
    skewMs = 0;
    await service.scheduler.reconcile();
    await waitFor(async () => Math.abs(await offsetMetric()) < 0.05, 5000, 'the reconcile to measure again');
    expect((await service.call('GET', '/readyz')).body.warning).toBeUndefined();
    skewMs = -300;
    await service.scheduler.reconcile();
    await waitFor(async () => (await offsetMetric()) > 0.25, 5000, 'the reconcile to measure again');
    expect((await service.call('GET', '/readyz')).body.warning).toMatch(/ms ahead of punctual's: .* fire that much late$/);
  });
});
