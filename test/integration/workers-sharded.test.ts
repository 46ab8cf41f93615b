/**
 * Pull workers with SHARDING=on: any process serves a lease. Two processes share the shards; a
 * worker waits on one of them only, and gets every task, those of the other process's shards too
 * (the hub's peek at the table finds them), each once: the claims stay conditional.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PunctualClient, type LeasedTask } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { leaseCounts, shardsOf, SHARDS } from '../helpers/shards.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
const services: TestService[] = [];

beforeAll(async () => {
  db = await createTestDatabase('workers_sharded');
  for (let n = 0; n < 2; n++) {
    const service = await startTestService(
      db,
      { PORT: '0', SHARDING: 'on', LEASE_MS: '1500', WORKER_TYPES: 'sharded_job' },
      { boot: false },
    );
    await service.start();
    services.push(service);
  }
  await waitFor(
    async () => {
      const counts = await leaseCounts(db);
      return (
        services.every((service) => (counts.get(service.owner) ?? 0) > 0) && [...counts.values()].reduce((a, b) => a + b, 0) === SHARDS
      );
    },
    20_000,
    'both processes hold shards',
  );
});

afterAll(async () => {
  for (const service of services) await service.stop();
  await db?.drop();
});

describe('pull workers with SHARDING=on', () => {
  it("a worker waiting on one process gets the other process's shards' tasks too, each once", async () => {
    const [a, b] = services as [TestService, TestService];
    const worker = new PunctualClient({ baseUrl: `http://127.0.0.1:${(a.app.server.address() as { port: number }).port}` });
    const shop = new PunctualClient({ baseUrl: `http://127.0.0.1:${(b.app.server.address() as { port: number }).port}` });
    const runAt = Date.now() + 500;
    const batch = await shop.createMany(Array.from({ length: 40 }, (_, n) => ({ type: 'sharded_job', payload: { n }, runAt })));
    const ids = batch.results.map((item) => item.id!);
    const ofB = await shardsOf(db, b.owner);
    expect(ids.some((id) => ofB.has(id % SHARDS))).toBe(true);

    const got: LeasedTask[] = [];
    const receivedAt = new Map<number, number>();
    while (got.length < ids.length) {
      const tasks = await worker.lease({ types: ['sharded_job'], max: 10, waitMs: 5000 });
      expect(tasks.length, 'a lease within 5 s').toBeGreaterThan(0);
      for (const task of tasks) receivedAt.set(task.id, Date.now());
      got.push(...tasks);
      await Promise.all(tasks.map((task) => worker.ack(task)));
    }
    expect(got.map((task) => task.id).sort((x, y) => x - y)).toEqual([...ids].sort((x, y) => x - y));
    for (const [, at] of receivedAt) expect(at).toBeGreaterThanOrEqual(runAt);
    // Found by the peek, at most about a second after they fell due.
    expect(Math.max(...receivedAt.values()) - runAt).toBeLessThan(2500);
    const [row] = await db.query<any[]>(
      "SELECT COUNT(*) AS n, SUM(attempts) AS a FROM punctual_tasks WHERE type = 'sharded_job' AND status = 'done'",
    );
    expect(row).toMatchObject({ n: 40 });
    expect(Number(row.a)).toBe(40);
  });
});
