/**
 * The type limits' groups under a flood of distinct `groupBy` values (the attack review's 64 KiB
 * `groupBy: "body"`): the in-process service on real MariaDB, the tasks created over HTTP and run
 * by the dispatcher. The groups kept for the rate windows must go once their window has passed,
 * and never hold the value itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService;

beforeAll(async () => {
  db = await createTestDatabase('group_keys');
  service = await startTestService(db, {}, { handlers: [testHandler('mail', async () => undefined)] });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

async function done(): Promise<number> {
  return Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'"))[0].n);
}

describe('distinct groupBy values', () => {
  it('leave no group behind once their window passed: 2,000 bodies of 1 KiB each', { timeout: 120_000 }, async () => {
    // A rate no test run reaches: nothing waits, but every start is recorded in its group's window.
    const limits = await service.call('PUT', '/types/mail/limits', { ratePerSecond: 100_000, groupBy: 'body' });
    expect(limits.status).toBe(200);
    const pastDue = new Date(Date.now() - 1000).toISOString();
    for (let batch = 0; batch < 2; batch++) {
      const tasks = Array.from({ length: 1000 }, (_, i) => ({
        type: 'mail',
        payload: { body: `${batch}-${i}:${'x'.repeat(1024)}` },
        runAt: pastDue,
      }));
      expect((await service.call('POST', '/tasks/batch', { tasks })).status).toBe(200);
    }
    await waitFor(async () => (await done()) === 2000, 90_000, 'the 2,000 runs');
    const afterFlood = service.limits.groupsTracked;
    expect(afterFlood).toBeGreaterThan(0); // the starts were recorded: the check below is not empty

    // Two windows (2 s) later, the next start sweeps the groups whose starts all left them.
    const last = Date.now();
    await waitFor(async () => Date.now() - last > 2500 || undefined, 5000, 'two windows');
    const one = { type: 'mail', payload: { body: 'last' }, runAt: new Date().toISOString() };
    expect((await service.call('POST', '/tasks', one)).status).toBe(201);
    await waitFor(async () => (await done()) === 2001, 20_000, 'the last run');
    console.log(`groups kept for the rate windows: ${afterFlood} after the flood, ${service.limits.groupsTracked} after the sweep`);
    expect(service.limits.groupsTracked).toBeLessThanOrEqual(1);
  });
});
