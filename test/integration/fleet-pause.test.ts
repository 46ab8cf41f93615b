/**
 * A pause, a resume and a limit change made through one process hold in another within a second
 * (two services on one database; the reconcile, a minute away, plays no part). A ledger row per
 * run shows what ran where and when.
 */
import type { RowDataPacket } from 'mysql2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { sleep, startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
const services: TestService[] = [];

beforeAll(async () => {
  db = await createTestDatabase('fleet_pause');
  await db.execute('CREATE TABLE ledger (task_id BIGINT UNSIGNED PRIMARY KEY, at DATETIME(3))');
});

afterEach(async () => {
  await Promise.all(services.splice(0).map((service) => service.stop()));
});

afterAll(async () => {
  await db?.drop();
});

const job = testHandler('fleet_job', async ({ conn, task }) => {
  await conn.query('INSERT INTO ledger (task_id, at) VALUES (?, UTC_TIMESTAMP(3))', [task.id]);
});

async function start(): Promise<TestService> {
  const service = await startTestService(db, { RECONCILE_INTERVAL_MS: '60000' }, { handlers: [job] });
  services.push(service);
  return service;
}

async function ranAt(id: number): Promise<number | undefined> {
  const [row] = await db.query<RowDataPacket[]>('SELECT at FROM ledger WHERE task_id = ?', [id]);
  return row === undefined ? undefined : (row.at as Date).getTime();
}

describe('flow control across processes', () => {
  it('a pause through one process holds in another within a second, and so does the resume', async () => {
    const a = await start();
    const b = await start();
    expect((await a.call('POST', '/types/fleet_job/pause')).status).toBe(200);
    const pausedAt = Date.now();
    // Due one second after the pause, created through and armed by the other process.
    const task = await b.call('POST', '/tasks', { type: 'fleet_job', runAt: pausedAt + 1_000 });
    expect(task.status).toBe(201);
    await sleep(pausedAt + 2_000 - Date.now());
    expect(await ranAt(task.body.id)).toBeUndefined();
    expect((await b.call('GET', `/tasks/${task.body.id}`)).body).toMatchObject({ status: 'pending', attempts: 0 });
    expect((await b.call('GET', '/types')).body.types.find((t: { type: string }) => t.type === 'fleet_job').paused).toBe(true);

    expect((await a.call('POST', '/types/fleet_job/resume')).status).toBe(200);
    const resumedAt = Date.now();
    await waitFor(
      async () =>
        (await b.call('GET', '/types')).body.types.find((t: { type: string }) => t.type === 'fleet_job').paused ? undefined : true,
      1_000,
      'the other process to see the resume',
    );
    const at = await waitFor(() => ranAt(task.body.id), 5_000, 'the run after the resume');
    console.log(`resume through one process: the other ran its waiting task ${at - resumedAt} ms later`);
    expect(at - resumedAt).toBeLessThan(1_000);
  });

  it('a limit change through one process is in force in the other within a second', async () => {
    const a = await start();
    const b = await start();
    expect((await a.call('PUT', '/types/fleet_job/limits', { maxConcurrency: 3, groupBy: 'group' })).status).toBe(200);
    await waitFor(
      async () => {
        const seen = (await b.call('GET', '/types')).body.types.find((t: { type: string }) => t.type === 'fleet_job');
        return seen.maxConcurrency === 3 && seen.groupBy === 'group' ? true : undefined;
      },
      1_000,
      'the other process to have the limits',
    );
  });
});
