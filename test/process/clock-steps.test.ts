/**
 * Steps of the wall clock, on the real server: libfaketime moves the server's wall clock (its
 * monotonic clock, which the timers wait on, is left alone); the database's clock is not moved.
 * The tasks are close_order: each run is one row of close_runs (a trigger writes it when a task
 * is marked done), so a second run would show; orders.closed_at is stamped by the database's clock,
 * which is the real time, and says when each ran.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { createFakeClock, type FakeClock } from '../helpers/faketime.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { createTasks, type ServerProcess, startServer, waitFor } from '../helpers/server.js';
import { checkShop, createShopDatabase, makeOrders, type Order } from '../helpers/shop.js';

const MINUTE = 60_000;

let db: TestDatabase;
let clock: FakeClock;
let server: ServerProcess | undefined;
const orders = makeOrders(200);
let nextOrder = 0;

beforeAll(async () => {
  clock = createFakeClock(); // fails with a clear message when libfaketime is missing
  db = await createShopDatabase('clock_steps', orders);
});

afterEach(async () => {
  if (server !== undefined && server.child.exitCode === null) server.child.kill('SIGCONT'); // never leave one stopped
  await server?.stop();
  server = undefined;
  clock.setOffset(0);
});

afterAll(async () => {
  // Every order closed at most once, and the stock matches the closes, across the whole file.
  if (db !== undefined) {
    const shop = await checkShop(db, orders);
    expect(shop.ranTwice).toBe(0);
    expect(shop.stockMatches).toBe(true);
  }
  await db?.drop();
  clock?.remove();
});

async function start(env: Record<string, string> = {}, faked = true): Promise<ServerProcess> {
  server = await startServer({ env: { DATABASE_URL: db.url, ...(faked ? clock.env : {}), ...env } });
  return server;
}

interface Created {
  id: number;
  /** By the server's clock. */
  runAt: number;
  order: Order;
}

/** `count` close_order tasks for orders not used yet. */
async function closes(count: number, when: (i: number) => { delayMs: number } | { runAt: number }): Promise<Created[]> {
  const picked = orders.slice(nextOrder, nextOrder + count);
  nextOrder += count;
  const ids = await createTasks(
    server!,
    picked.map((order, i) => ({ type: 'close_order', payload: { orderSn: order.orderSn }, ...when(i) })),
  );
  const rows = await db.query<any[]>('SELECT id, run_at FROM punctual_tasks WHERE id IN (?) ORDER BY id', [ids]);
  const runAt = new Map(rows.map((row) => [Number(row.id), (row.run_at as Date).getTime()]));
  // In id order, as runs() answers.
  return ids.map((id, i) => ({ id, runAt: runAt.get(id)!, order: picked[i]! })).sort((a, b) => a.id - b.id);
}

interface Run {
  status: string;
  attempts: number;
  /** Committed runs of its task: the close_runs ledger. */
  closes: number;
  /** When the order was closed, by the database's (real) clock; NaN while open. */
  closedAt: number;
  /** run_at is still ahead by the database's clock. */
  future: boolean;
}

async function runs(tasks: Created[]): Promise<Run[]> {
  const rows = await db.query<any[]>(
    `SELECT t.id, t.status, t.attempts, o.closed_at, t.run_at > UTC_TIMESTAMP(3) AS future,
            (SELECT COUNT(*) FROM close_runs c WHERE c.task_id = t.id) AS closes
       FROM punctual_tasks t JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))
      WHERE t.id IN (?) ORDER BY t.id`,
    [tasks.map((task) => task.id)],
  );
  return rows.map((row) => ({
    status: row.status,
    attempts: Number(row.attempts),
    closes: Number(row.closes),
    closedAt: row.closed_at === null ? Number.NaN : (row.closed_at as Date).getTime(),
    future: Number(row.future) === 1,
  }));
}

/** Waits until every task is done; answers how long after `since` each ran (sorted) and the rows. */
async function ranAfter(tasks: Created[], since: number, timeoutMs = 15_000): Promise<{ after: number[]; rows: Run[] }> {
  const rows = await waitFor(
    async () => {
      const current = await runs(tasks);
      return current.every((row) => row.status === 'done') ? current : undefined;
    },
    timeoutMs,
    `${tasks.length} tasks to run`,
  );
  return { after: rows.map((row) => row.closedAt - since).sort((a, b) => a - b), rows };
}

const onceEach = (rows: Run[]) => rows.every((row) => row.closes === 1 && row.attempts === 1);

async function metric(name: string): Promise<number | undefined> {
  const text = await fetch(`${server!.baseUrl}/metrics`).then((response) => response.text());
  return parsePrometheus(text).get(name);
}

describe('wall-clock steps (libfaketime)', () => {
  it("moves the server's Date.now and leaves its monotonic clock and the database's clock alone", async () => {
    await start();
    clock.setOffset(3600);
    const [task] = await closes(1, () => ({ delayMs: 3 * MINUTE }));
    const [row] = await db.query<any[]>('SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(3), created_at) AS ahead FROM punctual_tasks WHERE id = ?', [
      task!.id,
    ]);
    expect(Math.abs(Number(row.ahead) - 3600)).toBeLessThan(5); // the server's now is an hour ahead of the database's
    // Noticed as a step of an hour: the monotonic clock did not move with it.
    await waitFor(async () => (await metric('punctual_clock_steps_total')) === 1, 5000, 'the step to be noticed');
    expect(Math.abs((await metric('punctual_clock_last_step_seconds'))! - 3600)).toBeLessThan(1);
    expect((await server!.request('POST', `/tasks/${task!.id}/cancel`)).status).toBe(200);
  });

  it('a forward step of 6 minutes runs the 20 tasks it made overdue within 2 s, once each', async () => {
    await start();
    const tasks = await closes(20, () => ({ delayMs: 5 * MINUTE }));
    expect(await metric('punctual_armed_timers')).toBe(20);

    const steppedAt = Date.now();
    clock.setOffset(360);
    const { after, rows } = await ranAfter(tasks, steppedAt);
    console.log(`forward step of 6 min: the 20 tasks it made overdue ran ${after[0]}–${after[19]} ms after the step`);
    expect(after[0]).toBeGreaterThanOrEqual(0);
    expect(after[19]).toBeLessThan(2000);
    expect(onceEach(rows)).toBe(true);
    // Due by the server's clock, not yet by the database's: the claim compares with the server's time.
    expect(rows.every((row) => row.future)).toBe(true);

    expect(await metric('punctual_clock_steps_total')).toBe(1);
    expect(Math.abs((await metric('punctual_clock_last_step_seconds'))! - 360)).toBeLessThan(1);
  });

  it('a forward step larger than the horizon arms and runs what came due, without waiting for the refill', async () => {
    // A refill every 30 s and no reconcile: only the step itself can arm these in time.
    await start({ HORIZON_MS: String(MINUTE), REFILL_INTERVAL_MS: '30000', RECONCILE_INTERVAL_MS: String(24 * 3600_000) });
    const tasks = await closes(20, (i) => ({ delayMs: 5 * MINUTE + i * 100 }));
    expect(await metric('punctual_armed_timers')).toBe(0); // beyond the horizon: no timer yet

    const steppedAt = Date.now();
    clock.setOffset(360);
    const { after, rows } = await ranAfter(tasks, steppedAt);
    console.log(`forward step of 6 min past a 1-min horizon: the 20 tasks ran ${after[0]}–${after[19]} ms after the step`);
    expect(after[19]).toBeLessThan(2000);
    expect(onceEach(rows)).toBe(true);
    expect(await metric('punctual_clock_steps_total')).toBe(1);
  });

  it('a backward step of an hour runs nothing early; stepping back runs them at once', async () => {
    await start();
    const created = Date.now();
    const tasks = await closes(20, (i) => ({ runAt: created + 3000 + i * 10 }));
    clock.setOffset(-3600);
    expect(Date.now()).toBeLessThan(created + 3000); // stepped before any came due
    await waitFor(async () => (await metric('punctual_clock_steps_total')) === 1, 5000, 'the step to be noticed');
    expect(Math.abs((await metric('punctual_clock_last_step_seconds'))! + 3600)).toBeLessThan(1);

    // Wait past their old monotonic deadlines; a task due meanwhile by the new clock shows the
    // server is at work.
    const control = await closes(1, () => ({ delayMs: 500 }));
    const lastDue = Math.max(...tasks.map((task) => task.runAt));
    await waitFor(
      async () => Date.now() > lastDue + 2000 && (await runs(control))[0]!.status === 'done',
      15_000,
      'the old deadlines to pass',
    );
    expect((await runs(tasks)).every((row) => row.status === 'pending' && row.closes === 0)).toBe(true);
    expect(await metric('punctual_armed_timers')).toBe(20);

    const restoredAt = Date.now();
    clock.setOffset(0);
    const { after, rows } = await ranAfter(tasks, restoredAt);
    console.log(`backward step of 1 h: nothing ran early; the step back ran the 20 tasks ${after[0]}–${after[19]} ms after it`);
    expect(after[19]).toBeLessThan(2000);
    rows.forEach((row, i) => expect(row.closedAt).toBeGreaterThanOrEqual(tasks[i]!.runAt)); // never before its runAt
    expect(onceEach(rows)).toBe(true);
    expect(await metric('punctual_clock_steps_total')).toBe(2);
    expect(Math.abs((await metric('punctual_clock_last_step_seconds'))! - 3600)).toBeLessThan(1); // the step back
  });

  it('a process frozen for 5 s (SIGSTOP) runs what came due within 1 s of SIGCONT', async () => {
    await start({}, false);
    const due = Date.now() + 2000;
    const tasks = await closes(20, (i) => ({ runAt: due + i * 100 }));
    server!.child.kill('SIGSTOP');
    expect(Date.now()).toBeLessThan(due); // frozen before the first came due
    await new Promise((resolve) => setTimeout(resolve, 5000)); // the freeze itself
    expect((await runs(tasks)).every((row) => row.status === 'pending')).toBe(true);
    const wokeAt = Date.now();
    server!.child.kill('SIGCONT');
    const { after, rows } = await ranAfter(tasks, wokeAt);
    console.log(`frozen 5 s: the 20 tasks due meanwhile ran ${after[0]}–${after[19]} ms after SIGCONT`);
    expect(after[19]).toBeLessThan(1000);
    expect(onceEach(rows)).toBe(true);
    // Both clocks moved alike: a freeze is no step.
    expect(await metric('punctual_clock_steps_total')).toBe(0);
    expect(await metric('punctual_clock_late_wakeups_total')).toBeGreaterThanOrEqual(1);
  });
});
