/**
 * onKeyConflict "replace" (upsert) and maxDelayMs (debounce with a ceiling). A ledger row per run
 * (task_id unique) records the version the run saw, so a run that saw a mix of two versions, or
 * two runs of one task, or none, shows.
 */
import type { RowDataPacket } from 'mysql2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { sleep, startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService | undefined;

beforeAll(async () => {
  db = await createTestDatabase('replace');
  await db.execute('CREATE TABLE ledger (task_id BIGINT UNSIGNED PRIMARY KEY, a VARCHAR(16), b VARCHAR(16), at DATETIME(3))');
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  await db.execute('DELETE FROM ledger');
});

afterAll(async () => {
  await db?.drop();
});

/** Records what the run saw, in the run's transaction: a second run of a task is a duplicate key. */
const versioned = testHandler('versioned', async ({ conn, task, payload }) => {
  await conn.query('INSERT INTO ledger (task_id, a, b, at) VALUES (?, ?, ?, UTC_TIMESTAMP(3))', [task.id, payload.a, payload.b]);
});

async function start() {
  service = await startTestService(db, {}, { handlers: [versioned] });
  return service;
}

async function ledgerOf(id: number) {
  const [row] = await db.query<RowDataPacket[]>('SELECT a, b, at FROM ledger WHERE task_id = ?', [id]);
  return row;
}

describe('onKeyConflict replace', () => {
  it('a pending task takes the new payload and runAt (200), and runs once, with the new content, at the new time', async () => {
    const s = await start();
    const first = await s.call('POST', '/tasks', { type: 'versioned', key: 'r:1', payload: { a: 'old', b: 'old' }, delayMs: 60_000 });
    expect(first.status).toBe(201);
    const runAt = Date.now() + 400;
    const replaced = await s.call('POST', '/tasks', {
      type: 'versioned',
      key: 'r:1',
      payload: { a: 'new', b: 'new' },
      runAt,
      priority: 3,
      onKeyConflict: 'replace',
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id: first.body.id, status: 'pending', payload: { a: 'new', b: 'new' }, priority: 3 });
    expect(Date.parse(replaced.body.runAt)).toBe(runAt);
    const row = await waitFor(() => ledgerOf(first.body.id), 5_000, 'the run');
    expect(row).toMatchObject({ a: 'new', b: 'new' });
    expect(row.at.getTime()).toBeGreaterThanOrEqual(runAt);
    // The same replace again is a repeat: 200 with the task, nothing moves.
    const again = await s.call('POST', '/tasks', {
      type: 'versioned',
      key: 'r:1',
      payload: { a: 'new', b: 'new' },
      runAt,
      priority: 3,
      onKeyConflict: 'replace',
    });
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('done');
    // Done now: other content is a conflict, replace or not.
    const late = await s.call('POST', '/tasks', {
      type: 'versioned',
      key: 'r:1',
      payload: { a: 'x' },
      delayMs: 0,
      onKeyConflict: 'replace',
    });
    expect(late.status).toBe(409);
    expect(late.body.task.status).toBe('done');
  });

  it('without replace a repeat with other content is still 409; bad combinations are 400 and write nothing', async () => {
    const s = await start();
    await s.call('POST', '/tasks', { type: 'versioned', key: 'r:2', payload: { a: '1' }, delayMs: 60_000 });
    const conflict = await s.call('POST', '/tasks', { type: 'versioned', key: 'r:2', payload: { a: '2' }, delayMs: 60_000 });
    expect(conflict.status).toBe(409);
    expect(conflict.body.task.payload).toEqual({ a: '1' });
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ onKeyConflict: 'replace' }, /onKeyConflict.*needs body\/key/],
      [{ key: 'r:3', maxDelayMs: 1000 }, /maxDelayMs needs body\/onKeyConflict/],
      [{ key: 'r:3', onKeyConflict: 'merge' }, /onKeyConflict/],
      [{ key: 'r:3', onKeyConflict: 'replace', maxDelayMs: -1 }, /maxDelayMs/],
    ];
    for (const [extra, message] of cases) {
      const answer = await s.call('POST', '/tasks', { type: 'versioned', payload: {}, delayMs: 1000, ...extra });
      expect(answer.status, JSON.stringify(extra)).toBe(400);
      expect(answer.body.message).toMatch(message);
    }
    expect((await s.call('GET', '/tasks/by-key/r:3')).status).toBe(404);
    // Another type under the key is not replaced.
    const other = await s.call('POST', '/tasks', {
      type: 'close_order',
      key: 'r:2',
      payload: { orderSn: 'x' },
      delayMs: 0,
      onKeyConflict: 'replace',
    });
    expect(other.status).toBe(409);
  });

  it('maxDelayMs: replaces keep pushing the task, but never past its first runAt + maxDelayMs', async () => {
    const s = await start();
    const firstRunAt = Date.now() + 1_000;
    const body = (runAt: number, n: number) => ({
      type: 'versioned',
      key: 'debounce:1',
      payload: { a: `v${n}`, b: `v${n}` },
      runAt,
      onKeyConflict: 'replace',
      maxDelayMs: 1_500,
    });
    expect((await s.call('POST', '/tasks', body(firstRunAt, 0))).status).toBe(201);
    const pushed = await s.call('POST', '/tasks', body(firstRunAt + 1_000, 1));
    expect(Date.parse(pushed.body.runAt)).toBe(firstRunAt + 1_000);
    const capped = await s.call('POST', '/tasks', body(firstRunAt + 60_000, 2));
    expect(capped.status).toBe(200);
    expect(Date.parse(capped.body.runAt)).toBe(firstRunAt + 1_500);
    // A later replace with another ceiling does not move the first one.
    const again = await s.call('POST', '/tasks', { ...body(firstRunAt + 60_000, 3), maxDelayMs: 60_000 });
    expect(Date.parse(again.body.runAt)).toBe(firstRunAt + 1_500);
    const row = await waitFor(() => ledgerOf(again.body.id), 5_000, 'the run');
    expect(row).toMatchObject({ a: 'v3', b: 'v3' });
    expect(row.at.getTime()).toBeGreaterThanOrEqual(firstRunAt + 1_500);
  });

  it('races with the timer: each task runs once, with the version its replace answer says, never a mix', async () => {
    const s = await start();
    const N = 200;
    const due = Date.now() + 3_000;
    const created = await s.call('POST', '/tasks/batch', {
      tasks: Array.from({ length: N }, (_, i) => ({ type: 'versioned', key: `race:${i}`, payload: { a: 'old', b: 'old' }, runAt: due })),
    });
    expect(created.body.created).toBe(N);
    const ids: number[] = created.body.results.map((r: { id: number }) => r.id);
    // Replaces spread over 800 ms around the instant the timers fire; each keeps the task due.
    expect(Date.now()).toBeLessThan(due - 700);
    const answers = await Promise.all(
      ids.map(async (_, i) => {
        await sleep(due - 600 + (i * 800) / N - Date.now());
        return s.call('POST', '/tasks', {
          type: 'versioned',
          key: `race:${i}`,
          payload: { a: 'new', b: 'new' },
          runAt: due,
          onKeyConflict: 'replace',
        });
      }),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.every((status) => status === 200 || status === 409)).toBe(true);
    const rows = await waitFor(
      async () => {
        const found = await db.query<RowDataPacket[]>('SELECT task_id, a, b FROM ledger WHERE task_id IN (?)', [ids]);
        return found.length === N ? found : undefined;
      },
      15_000,
      'every task to run once',
    );
    const seen = new Map(rows.map((row) => [Number(row.task_id), row]));
    let replacedFirst = 0;
    for (const [i, id] of ids.entries()) {
      const row = seen.get(id)!;
      expect(row.a, `task ${id}`).toBe(row.b);
      expect(row.a, `task ${id} answered ${statuses[i]}`).toBe(statuses[i] === 200 ? 'new' : 'old');
      if (statuses[i] === 200) replacedFirst++;
    }
    console.log(`replace races: ${replacedFirst} of ${N} replaces came before the run, ${N - replacedFirst} after`);
    // Both sides of the race were run into.
    expect(replacedFirst).toBeGreaterThan(0);
    expect(replacedFirst).toBeLessThan(N);
    // Every task done, none twice (the ledger's key) and none left.
    const [left] = await db.query<RowDataPacket[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status <> 'done'", [ids]);
    expect(Number(left!.n)).toBe(0);
  });
});
