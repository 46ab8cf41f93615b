/**
 * A task-level group: settable on any type (the built-in handlers' payloads are closed), shown on
 * the task; a type's limits with groupBy "group" hold per value of it. A ledger of each run's start
 * and end shows what ran at once.
 */
import type { RowDataPacket } from 'mysql2';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('task_group');

beforeAll(async () => {
  await fixture.db.execute(
    'CREATE TABLE ledger (task_id BIGINT UNSIGNED PRIMARY KEY, grp VARCHAR(64), started DATETIME(3), ended DATETIME(3))',
  );
});

const slow = testHandler('slowjob', async ({ conn, task }) => {
  await conn.query('INSERT INTO ledger (task_id, grp, started) VALUES (?, ?, UTC_TIMESTAMP(3))', [task.id, task.group]);
  await conn.query('SELECT SLEEP(0.3)');
  await conn.query('UPDATE ledger SET ended = UTC_TIMESTAMP(3) WHERE task_id = ?', [task.id]);
});

describe('a task-level group', () => {
  it('is taken on create and batch by every type, built-in ones too, and shown on the task', async () => {
    fixture.service = await fixture.start({}, { handlers: [slow] });
    const one = await fixture.service.call('POST', '/tasks', {
      type: 'close_order',
      payload: { orderSn: 'G1' },
      delayMs: 60_000,
      group: 'merchant:42',
    });
    expect(one.status).toBe(201);
    expect(one.body.group).toBe('merchant:42');
    const batch = await fixture.service.call('POST', '/tasks/batch', {
      tasks: [
        { type: 'close_order', payload: { orderSn: 'G2' }, delayMs: 60_000, group: 'merchant:7' },
        { type: 'close_order', payload: { orderSn: 'G3' }, delayMs: 60_000, group: 'bad group!' },
      ],
    });
    expect(batch.body.results.map((r: { status: number }) => r.status)).toEqual([201, 400]);
    expect((await fixture.service.call('GET', `/tasks/${batch.body.results[0].id}`)).body.group).toBe('merchant:7');
    expect(
      (await fixture.service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'G4' }, delayMs: 0 })).body.group,
    ).toBeNull();
  });

  it('limits with groupBy "group" hold per group: one at a time in each, the groups side by side', async () => {
    fixture.service = await fixture.start({ CONCURRENCY: '4', BATCH_SIZE: '1' }, { handlers: [slow] });
    // One task a batch: a batch runs its database tasks one after another, batches run side by side.
    const limits = await fixture.service.call('PUT', '/types/slowjob/limits', { maxConcurrency: 1, groupBy: 'group' });
    expect(limits.status).toBe(200);
    const tasks = ['a', 'a', 'a', 'b', 'b', 'b'].map((group) => ({
      type: 'slowjob',
      payload: {},
      delayMs: 100,
      group: `merchant:${group}`,
    }));
    const created = await fixture.service.call('POST', '/tasks/batch', { tasks });
    const ids: number[] = created.body.results.map((r: { id: number }) => r.id);
    const rows = await waitFor(
      async () => {
        const found = await fixture.db.query<RowDataPacket[]>(
          'SELECT grp, started, ended FROM ledger WHERE task_id IN (?) AND ended IS NOT NULL',
          [ids],
        );
        return found.length === ids.length ? found : undefined;
      },
      15_000,
      'every run',
    );
    const overlaps = (x: RowDataPacket, y: RowDataPacket) => x.started < y.ended && y.started < x.ended;
    let across = 0;
    for (const [i, x] of rows.entries()) {
      for (const y of rows.slice(i + 1)) {
        if (x.grp === y.grp) expect(overlaps(x, y), `${x.grp} ran two at once`).toBe(false);
        else if (overlaps(x, y)) across++;
      }
    }
    expect(across).toBeGreaterThan(0);
  });
});
