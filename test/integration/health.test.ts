import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('health');
});

afterAll(async () => {
  await db?.drop();
});

describe('probes', () => {
  it('is alive at once, ready only once the boot load is armed, and not ready when the database is gone', async () => {
    const service = await startTestService(db, {}, { boot: false });
    expect(await service.call('GET', '/healthz')).toEqual({ status: 200, body: { status: 'ok', auth: false } });
    expect(await service.call('GET', '/readyz')).toEqual({
      status: 503,
      body: { status: 'starting', armed: 0, reason: 'the boot load is not armed yet' },
    });
    await service.boot();
    expect(await service.call('GET', '/readyz')).toEqual({
      status: 200,
      body: { status: 'ready', armed: 0, dbClockOffsetMs: expect.any(Number) },
    });
    await service.database.close();
    expect(await service.call('GET', '/readyz')).toEqual({
      status: 503,
      body: { status: 'unavailable', armed: 0, reason: 'the database does not answer' },
    });
    expect((await service.call('GET', '/healthz')).status).toBe(200);
    await service.stop();
  });
});
