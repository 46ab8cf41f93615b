/**
 * priority on create and batch: shown on the task, kept by the table reads that arm timers, and
 * among tasks due together a higher one runs first (a one-at-a-time ledger of runs shows the order).
 */
import type { RowDataPacket } from 'mysql2';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService } from '../helpers/service.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('priority');

beforeAll(async () => {
  await fixture.db.execute('CREATE TABLE ledger (seq INT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT UNSIGNED NOT NULL UNIQUE)');
});

/** A handler that writes one ledger row per run, in the run's transaction: the order of runs. */
const ledger = testHandler('ledger', async ({ conn, task }) => {
  await conn.query('INSERT INTO ledger (task_id) VALUES (?)', [task.id]);
});

/** The ledger's handler, after a pause of `sleepS` in its transaction when the payload asks for one. */
const slowLedger = testHandler('slow_ledger', async ({ conn, task, payload }) => {
  if (typeof payload.sleepS === 'number') await conn.query('SELECT SLEEP(?)', [payload.sleepS]);
  await conn.query('INSERT INTO ledger (task_id) VALUES (?)', [task.id]);
});

describe('priority', () => {
  it('is taken on create and batch, shown on the task, and refused outside -10..10', async () => {
    fixture.service = await fixture.start({}, { handlers: [ledger] });
    const one = await fixture.service.call('POST', '/tasks', { type: 'ledger', delayMs: 60_000, priority: 7 });
    expect(one.status).toBe(201);
    expect(one.body.priority).toBe(7);
    expect((await fixture.service.call('GET', `/tasks/${one.body.id}`)).body.priority).toBe(7);
    const plain = await fixture.service.call('POST', '/tasks', { type: 'ledger', delayMs: 60_000 });
    expect(plain.body.priority).toBe(0);
    const batch = await fixture.service.call('POST', '/tasks/batch', {
      tasks: [
        { type: 'ledger', delayMs: 60_000, priority: -10 },
        { type: 'ledger', delayMs: 60_000, priority: 11 },
      ],
    });
    expect(batch.body.results.map((r: { status: number }) => r.status)).toEqual([201, 400]);
    expect(batch.body.results[1].message).toMatch(/priority/);
    expect((await fixture.service.call('GET', `/tasks/${batch.body.results[0].id}`)).body.priority).toBe(-10);
    for (const bad of [11, -11, 1.5, '3']) {
      const answer = await fixture.service.call('POST', '/tasks', { type: 'ledger', delayMs: 1000, priority: bad });
      expect(answer.status, String(bad)).toBe(400);
      expect(answer.body.message).toMatch(/priority/);
    }
    // A repeat of a key with another priority is another request.
    const keyed = await fixture.service.call('POST', '/tasks', { type: 'ledger', runAt: Date.now() + 60_000, key: 'p:1', priority: 1 });
    const again = await fixture.service.call('POST', '/tasks', {
      type: 'ledger',
      runAt: Date.parse(keyed.body.runAt),
      key: 'p:1',
      priority: 2,
    });
    expect(again.status).toBe(409);
  });

  it('overdue tasks read from the table run highest priority first, whatever their ids', async () => {
    await fixture.db.execute('DELETE FROM ledger');
    // Inserted straight, overdue, while no service runs: the boot load arms them all at once.
    const past = new Date(Date.now() - 5_000);
    const priorities = [0, 3, -2, 9, 0, 3, 9, -2, 5, 0];
    const ids: number[] = [];
    for (const priority of priorities) {
      const result = await fixture.db.execute(
        "INSERT INTO punctual_tasks (type, payload, run_at, priority) VALUES ('ledger', '{}', ?, ?)",
        [past, priority],
      );
      ids.push(result.insertId);
    }
    // One at a time, so the order of runs is the order of claims.
    fixture.service = await fixture.start({ CONCURRENCY: '1', BATCH_SIZE: '1', DB_POOL_SIZE: '8' }, { handlers: [ledger] });
    const rows = await waitFor(
      async () => {
        const found = await fixture.db.query<RowDataPacket[]>('SELECT task_id FROM ledger ORDER BY seq');
        return found.length === ids.length ? found : undefined;
      },
      10_000,
      'every task to run',
    );
    const ran = rows.map((row) => priorities[ids.indexOf(Number(row.task_id))]);
    expect(ran).toEqual([...priorities].sort((a, b) => b - a));
  });

  it('a higher task that comes due while every slot runs lower ones starts beside them, not after', async () => {
    await fixture.db.execute('DELETE FROM ledger');
    fixture.service = await startTestService(
      fixture.db,
      { CONCURRENCY: '1', BATCH_SIZE: '1', DB_POOL_SIZE: '8' },
      { handlers: [slowLedger] },
    );
    const now = Date.now();
    // The one slot: a low task whose run holds its transaction 1.5 s.
    const low = await fixture.service.call('POST', '/tasks', {
      type: 'slow_ledger',
      runAt: now + 300,
      priority: -5,
      payload: { sleepS: 1.5 },
    });
    // Due while it runs.
    const high = await fixture.service.call('POST', '/tasks', { type: 'slow_ledger', runAt: now + 800, priority: 5, payload: {} });
    expect([low.status, high.status]).toEqual([201, 201]);
    const rows = await waitFor(
      async () => {
        const found = await fixture.db.query<RowDataPacket[]>('SELECT task_id FROM ledger ORDER BY seq');
        return found.length === 2 ? found : undefined;
      },
      10_000,
      'both tasks to run',
    );
    // The high one's ledger row came first: it ran during the low one's pause.
    expect(rows.map((row) => Number(row.task_id))).toEqual([high.body.id, low.body.id]);
  });
});
