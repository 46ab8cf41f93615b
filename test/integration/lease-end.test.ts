/**
 * A run whose process died mid-call (kill -9, an OOM) leaves its task running under a lease nobody
 * renews. The process that boots next, or takes the task's shard over, recovers it when that lease
 * ends (at the next refill), not at its next reconcile, which may be a whole interval later. Here
 * the reconcile interval is a day: only the lease's end can bring the task back.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
const services: TestService[] = [];

const ENV = { REFILL_INTERVAL_MS: '100', RECONCILE_INTERVAL_MS: String(24 * 3600_000), HORIZON_MS: String(3600_000) };
/** How long the dead process's lease still runs when the test starts the next one. */
const LEASE_LEFT_MS = 8000;

beforeAll(async () => {
  db = await createTestDatabase('lease_end');
});

afterEach(async () => {
  for (const service of services.splice(0).reverse()) await service.stop();
});

afterAll(async () => {
  await db?.drop();
});

/** A task a dead process claimed: running, its lease ending LEASE_LEFT_MS from now. Answers its id and the lease's end. */
async function claimedByTheDead(): Promise<{ id: number; leaseUntil: number }> {
  const leaseUntil = Date.now() + LEASE_LEFT_MS;
  const result = await db.execute(
    `INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, lease_owner, lease_until)
     VALUES ('close_order', '{"orderSn":"GONE"}', ?, 'running', 1, 'gone', ?)`,
    [new Date(Date.now() - 1000), new Date(leaseUntil)],
  );
  return { id: Number((result as { insertId: number }).insertId), leaseUntil };
}

async function leaseOf(id: number): Promise<{ status: string; lease_owner: string | null }> {
  const [row] = await db.query<any[]>('SELECT status, lease_owner FROM punctual_tasks WHERE id = ?', [id]);
  return row;
}

describe("a dead process's run", () => {
  it.each([
    ['a process that boots', {}],
    ['the process that takes its shard over', { SHARDING: 'on', LEASE_MS: '1500' }],
  ])('is recovered by %s when its lease ends, not at the next reconcile', async (_, env) => {
    await db.execute('DELETE FROM punctual_tasks');
    const { id, leaseUntil } = await claimedByTheDead();
    services.push(await startTestService(db, { ...ENV, ...env }));
    // Still the dead process's while its lease runs: nothing steals a lease that may be alive.
    expect(await leaseOf(id)).toMatchObject({ status: 'running', lease_owner: 'gone' });
    await waitFor(async () => (await leaseOf(id)).lease_owner !== 'gone', LEASE_LEFT_MS + 30_000, 'the run to be recovered');
    const recoveredAt = Date.now();
    expect(recoveredAt).toBeGreaterThanOrEqual(leaseUntil);
    // At a refill after the lease's end (every 100 ms): far sooner than the day-long reconcile,
    // with room for a loaded machine (the precise figure is not this test's).
    expect(recoveredAt - leaseUntil).toBeLessThan(30_000);
  });
});
