/**
 * A change of a type's pause or limits is one operation: written and in force in this process
 * when it returns, whoever calls it. The reconcile is set far off, so nothing but the change
 * itself can have put it in force; a change written straight to the table shows the difference.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService | undefined;

const HANDLERS = [testHandler('mail', async () => undefined)];

async function boot(): Promise<TestService> {
  service = await startTestService(db, { RECONCILE_INTERVAL_MS: '600000' }, { handlers: HANDLERS });
  return service;
}

beforeAll(async () => {
  db = await createTestDatabase('type_controls');
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  await db.execute('DELETE FROM punctual_type_controls');
});

afterAll(async () => {
  await db?.drop();
});

describe('a type control change', () => {
  it('through the pause route is in force in this process when the route answers', async () => {
    await boot();
    expect(service!.limits.control('mail')?.paused).toBeUndefined();
    const answer = await service!.call('POST', '/types/mail/pause');
    expect(answer.status).toBe(200);
    expect(service!.limits.control('mail')?.paused).toBe(true);
    await service!.call('POST', '/types/mail/resume');
    expect(service!.limits.control('mail')?.paused).toBe(false);
  });

  it('through the limits route is in force in this process when the route answers', async () => {
    await boot();
    const answer = await service!.call('PUT', '/types/mail/limits', { maxConcurrency: 2, groupBy: 'shop' });
    expect(answer.status).toBe(200);
    expect(service!.limits.control('mail')).toMatchObject({ maxConcurrency: 2, groupBy: 'shop', ratePerSecond: null });
  });

  it('through TypeControls, with no route at all, is in force when it resolves', async () => {
    await boot();
    await service!.typeControls.pause('mail');
    expect(service!.limits.control('mail')?.paused).toBe(true);
    await service!.typeControls.setLimits('mail', { ratePerSecond: 3 });
    expect(service!.limits.control('mail')).toMatchObject({ paused: true, ratePerSecond: 3 });
    await service!.typeControls.resume('mail');
    expect(service!.limits.control('mail')).toMatchObject({ paused: false, ratePerSecond: 3 });
  });

  it('written straight to the table is not in force until the settings are read again', async () => {
    await boot();
    await db.execute('INSERT INTO punctual_type_controls (type, paused, updated_at) VALUES (?, 1, UTC_TIMESTAMP(3))', ['mail']);
    expect(service!.limits.control('mail')).toBeUndefined();
    await service!.typeControls.load();
    expect(service!.limits.control('mail')?.paused).toBe(true);
  });
});
