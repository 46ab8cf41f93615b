/**
 * expireAfterMs: a task that could not start within that long after its runAt (punctual was down,
 * its type was paused) ends skipped as expired and never runs; one still within it runs. A ledger
 * row per run shows what ran.
 */
import type { RowDataPacket } from 'mysql2';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { sleep, type TestService } from '../helpers/service.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('expiry');

beforeAll(async () => {
  await fixture.db.execute('CREATE TABLE ledger (task_id BIGINT UNSIGNED PRIMARY KEY)');
});

const sale = testHandler('start_sale', async ({ conn, task }) => {
  await conn.query('INSERT INTO ledger (task_id) VALUES (?)', [task.id]);
});

const start = () => fixture.start({}, { handlers: [sale] });

async function ran(ids: number[]): Promise<number[]> {
  const rows = await fixture.db.query<RowDataPacket[]>('SELECT task_id FROM ledger WHERE task_id IN (?) ORDER BY task_id', [ids]);
  return rows.map((row) => Number(row.task_id));
}

async function settled(s: TestService, id: number) {
  return waitFor(
    async () => {
      const task = (await s.call('GET', `/tasks/${id}`)).body;
      return task.status === 'pending' ? undefined : task;
    },
    10_000,
    `task ${id} to settle`,
  );
}

describe('expireAfterMs', () => {
  it('through an outage: the task past its expiry is skipped unrun, the one within it runs', async () => {
    fixture.service = await start();
    // Due 1.5 s ahead: the three creates and the stop come before, even on a loaded machine.
    const runAt = Date.now() + 1_500;
    const expiring = await fixture.service.call('POST', '/tasks', { type: 'start_sale', runAt, expireAfterMs: 1_000 });
    expect(expiring.status).toBe(201);
    expect(expiring.body.expireAfterMs).toBe(1_000);
    const patient = await fixture.service.call('POST', '/tasks', { type: 'start_sale', runAt, expireAfterMs: 60_000 });
    const plain = await fixture.service.call('POST', '/tasks', { type: 'start_sale', runAt });
    // punctual goes down before they are due and comes back 1.5 s after they were.
    await fixture.service.stop();
    fixture.service = undefined;
    expect(Date.now()).toBeLessThan(runAt);
    await sleep(runAt + 1_500 - Date.now());
    fixture.service = await start();
    const expired = await settled(fixture.service, expiring.body.id);
    expect(expired).toMatchObject({ status: 'skipped', attempts: 0, lastError: expect.stringMatching(/^expired: /) });
    expect((await settled(fixture.service, patient.body.id)).status).toBe('done');
    expect((await settled(fixture.service, plain.body.id)).status).toBe('done');
    expect(await ran([expiring.body.id, patient.body.id, plain.body.id])).toEqual([patient.body.id, plain.body.id]);
    // Counted once the skip's transaction has committed, a moment after the row says so: waited for.
    await waitFor(
      async () =>
        /punctual_tasks_expired_total\{type="start_sale"\} 1/.test(
          (await fixture.service!.app.inject({ method: 'GET', url: '/metrics' })).body,
        ),
      10_000,
      'the expiry to be counted',
    );
    expect(fixture.service.logs.some((line) => line.msg === 'task expired: skipped, not run' && line.taskId === expiring.body.id)).toBe(
      true,
    );
  });

  it('through a pause of its type: resumed after its expiry, it is skipped, never run', async () => {
    fixture.service = await start();
    expect((await fixture.service.call('POST', '/types/start_sale/pause')).status).toBeLessThan(300);
    const task = await fixture.service.call('POST', '/tasks', { type: 'start_sale', delayMs: 100, expireAfterMs: 700 });
    await sleep(1_200);
    expect((await fixture.service.call('GET', `/tasks/${task.body.id}`)).body.status).toBe('pending');
    expect((await fixture.service.call('POST', '/types/start_sale/resume')).status).toBeLessThan(300);
    expect(await settled(fixture.service, task.body.id)).toMatchObject({
      status: 'skipped',
      lastError: expect.stringMatching(/^expired: /),
    });
    expect(await ran([task.body.id])).toEqual([]);
  });

  it('is refused outside 1..10 years with a 400 naming it', async () => {
    fixture.service = await start();
    for (const bad of [0, -1, 1.5, 'soon']) {
      const answer = await fixture.service.call('POST', '/tasks', { type: 'start_sale', delayMs: 0, expireAfterMs: bad });
      expect(answer.status, String(bad)).toBe(400);
      expect(answer.body.message).toMatch(/expireAfterMs/);
    }
  });
});
