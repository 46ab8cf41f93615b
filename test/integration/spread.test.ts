/** spreadMs on create and batch: runAt + hash(key) mod spreadMs, the same for the same key; random once without one. */
import { describe, expect, it } from 'vitest';
import { spreadOffset } from '../../src/time/spread.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('spread');

const AT = Date.parse('2030-11-11T00:00:00.000Z');

describe('spreadMs', () => {
  it('a keyed create lands on runAt + hash(key) mod spreadMs, and the same create repeated is a repeat at the same instant', async () => {
    fixture.service = await fixture.start();
    const body = { type: 'close_order', payload: { orderSn: 'SN1' }, runAt: AT, key: 'close_order:SN1', spreadMs: 30_000 };
    const first = await fixture.service.call('POST', '/tasks', body);
    expect(first.status).toBe(201);
    expect(Date.parse(first.body.runAt)).toBe(AT + spreadOffset('close_order:SN1', 30_000));
    const again = await fixture.service.call('POST', '/tasks', body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.body.id, runAt: first.body.runAt });
    // With delayMs the same: the repeat asks for the instant the first one got.
    const delayed = { type: 'close_order', payload: { orderSn: 'SN2' }, delayMs: 3_600_000, key: 'close_order:SN2', spreadMs: 30_000 };
    const one = await fixture.service.call('POST', '/tasks', delayed);
    expect(Date.parse(one.body.runAt) - Date.parse(one.body.createdAt)).toBe(3_600_000 + spreadOffset('close_order:SN2', 30_000));
    expect((await fixture.service.call('POST', '/tasks', delayed)).status).toBe(200);
  });

  it('a batch of a wall lands spread over the window, each key where its hash says; without keys, anywhere in it', async () => {
    fixture.service = await fixture.start();
    const keyed = Array.from({ length: 1000 }, (_, i) => ({
      type: 'close_order',
      payload: { orderSn: `W${i}` },
      runAt: AT,
      key: `wall:${i}`,
      spreadMs: 10_000,
    }));
    const answer = await fixture.service.call('POST', '/tasks/batch', { tasks: keyed });
    expect(answer.body.created).toBe(1000);
    const rows = await fixture.db.query<any[]>(
      "SELECT task_key, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', run_at) DIV 1000 AS at FROM punctual_tasks WHERE task_key LIKE 'wall:%'",
    );
    const slots = new Array<number>(10).fill(0);
    for (const row of rows) {
      const offset = Number(row.at) - AT;
      expect(offset).toBe(spreadOffset(row.task_key, 10_000));
      slots[Math.floor(offset / 1000)]!++;
    }
    for (const count of slots) expect(count).toBeGreaterThan(50); // 100 a second on average
    const loose = await fixture.service.call('POST', '/tasks/batch', {
      tasks: Array.from({ length: 200 }, (_, i) => ({ type: 'close_order', payload: { orderSn: `L${i}` }, runAt: AT, spreadMs: 10_000 })),
    });
    const ids = loose.body.results.map((r: { id: number }) => r.id);
    const offsets = (
      await fixture.db.query<any[]>(
        "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', run_at) DIV 1000 AS at FROM punctual_tasks WHERE id IN (?)",
        [ids],
      )
    ).map((row) => Number(row.at) - AT);
    expect(Math.min(...offsets)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...offsets)).toBeLessThan(10_000);
    expect(new Set(offsets).size).toBeGreaterThan(150);
  });

  it('is refused above a day, below 0, and with cron', async () => {
    fixture.service = await fixture.start();
    const cases: Record<string, unknown>[] = [
      { runAt: AT, spreadMs: 86_400_001 },
      { runAt: AT, spreadMs: -1 },
      { cron: '0 0 * * *', spreadMs: 1000 },
    ];
    for (const extra of cases) {
      const answer = await fixture.service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: 'X' }, ...extra });
      expect(answer.status, JSON.stringify(extra)).toBe(400);
      expect(answer.body.message).toMatch(/spreadMs/);
    }
  });
});
