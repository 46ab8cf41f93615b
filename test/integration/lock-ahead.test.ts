/**
 * Locked ahead, committed on time (LOCK_AHEAD_MS, src/time/lock-ahead.ts, src/dispatch/batch-try.ts),
 * against MariaDB with a lead long enough to watch: a close_order batch claims its task and locks
 * the order before runAt, and only its COMMIT waits for runAt, so the order is held by the batch
 * before runAt, closed at runAt or later, and its stock comes back once. A handler that does not
 * lock ahead has its task claimed early too, but starts at runAt, never before. And the boot opens
 * the batches' connections, so the first firings pay no handshake.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { checkShop, closeLateness, createShopDatabase, makeOrders, runsOf } from '../helpers/shop.js';

const LEAD_MS = 400;
const orders = makeOrders(7);
let db: TestDatabase;
let service: TestService | undefined;

/** When each run of `note_start` started, by the wall clock. */
const starts = new Map<number, number>();
const noteStart = testHandler('note_start', async ({ task }) => {
  starts.set(task.id, Date.now());
});

beforeAll(async () => {
  db = await createShopDatabase('lock_ahead', orders);
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
});

afterAll(async () => {
  await db?.drop();
});

async function create(body: Record<string, unknown>): Promise<{ id: number; runAt: string }> {
  const answer = await service!.call('POST', '/tasks', body);
  expect(answer.status).toBe(201);
  return answer.body;
}

/**
 * The first moment another session finds `sql`'s row locked (`FOR UPDATE NOWAIT` refused), or
 * undefined once `stopAt` passed without it.
 */
async function firstHeld(sql: string, values: unknown[], stopAt: number): Promise<number | undefined> {
  while (Date.now() < stopAt) {
    try {
      await db.query(`${sql} FOR UPDATE NOWAIT`, values);
    } catch (error) {
      const errno = (error as { errno?: number }).errno;
      // MariaDB answers a refused NOWAIT as a lock wait timeout, MySQL 8 as ER_LOCK_NOWAIT.
      if (errno === 1205 || errno === 3572) return Date.now();
      throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return undefined;
}

async function settled(id: number): Promise<{ status: string; runAt: string; finishedAt: string }> {
  return waitFor(
    async () => {
      const { body } = await service!.call('GET', `/tasks/${id}`);
      return body.status === 'done' || body.status === 'failed' ? body : undefined;
    },
    10_000,
    `task ${id} to settle`,
  );
}

describe('a batch locked ahead', () => {
  it('holds the order before runAt, and closes it at runAt or later, once', async () => {
    service = await startTestService(db, { LOCK_AHEAD_MS: String(LEAD_MS) });
    const runAt = Date.now() + 1500;
    const order = orders[0]!;
    const task = await create({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt });
    const held = await firstHeld('SELECT id FROM orders WHERE order_sn = ?', [order.orderSn], runAt);
    expect(held, 'the order row was locked before runAt').toBeDefined();
    expect(held!).toBeLessThan(runAt);
    const done = await settled(task.id);
    expect(done.status).toBe('done');
    expect(Date.parse(done.finishedAt)).toBeGreaterThanOrEqual(runAt);
    const [closed] = await closeLateness(db, [task.id]);
    expect(closed!.late).toBeGreaterThanOrEqual(0);
    expect(await runsOf(db, [task.id])).toEqual(new Map([[task.id, 1]]));
    expect(await checkShop(db, orders)).toMatchObject({ closed: 1, ranTwice: 0, stockMatches: true });
  });

  it('behind by more than the lead, never keeps a late task waiting for one ahead of it in the same claim', async () => {
    // The longest lead there is (LOCK_AHEAD_MS ≤ 1000), so that the one ahead is still within it when
    // a loaded machine gets to the claim, and waiting for it (AHEAD_MS) stands far above a slow
    // close: it was 300 ms ahead, and a close once took 212 ms under load.
    const lead = 1000;
    const AHEAD_MS = 800;
    service = await startTestService(db, { LOCK_AHEAD_MS: String(lead) });
    const now = Date.now();
    const [due, ahead] = [orders[5]!, orders[6]!];
    // One request: both timers fire in one turn, and one claim locks both.
    const { status, body } = await service.call('POST', '/tasks/batch', {
      tasks: [
        { type: 'close_order', payload: { orderSn: due.orderSn }, runAt: now - 2 * lead },
        { type: 'close_order', payload: { orderSn: ahead.orderSn }, runAt: now + AHEAD_MS },
      ],
    });
    expect(status).toBe(200);
    const ids = (body.results as { id: number }[]).map((result) => result.id);
    for (const id of ids) expect((await settled(id)).status).toBe('done');
    const [dueClose, aheadClose] = await closeLateness(db, ids);
    // Waiting for the other would close it AHEAD_MS or more after the request.
    expect(dueClose!.late - 2 * lead, 'the late one closed without waiting for the other').toBeLessThan(AHEAD_MS);
    expect(aheadClose!.late).toBeGreaterThanOrEqual(0);
    expect(await runsOf(db, ids)).toEqual(new Map(ids.map((id) => [id, 1])));
  });

  it('makes a cancel inside the lead wait for the run, then refuses it: run once, not cancelled', async () => {
    service = await startTestService(db, { LOCK_AHEAD_MS: String(LEAD_MS) });
    const runAt = Date.now() + 1500;
    const order = orders[1]!;
    const task = await create({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt });
    expect(await firstHeld('SELECT id FROM punctual_tasks WHERE id = ?', [task.id], runAt)).toBeDefined();
    const cancel = await service.call('POST', `/tasks/${task.id}/cancel`);
    expect(Date.now()).toBeGreaterThanOrEqual(runAt);
    expect(cancel.status).toBe(409);
    expect((await settled(task.id)).status).toBe('done');
    expect(await runsOf(db, [task.id])).toEqual(new Map([[task.id, 1]]));
  });

  it('claims the task of a handler that does not lock ahead early, and starts it at runAt, not before', async () => {
    service = await startTestService(db, { LOCK_AHEAD_MS: String(LEAD_MS) }, { handlers: [noteStart] });
    const runAt = Date.now() + 1500;
    const task = await create({ type: 'note_start', payload: {}, runAt });
    const held = await firstHeld('SELECT id FROM punctual_tasks WHERE id = ?', [task.id], runAt);
    expect(held, 'the task row was claimed before runAt').toBeDefined();
    expect(starts.has(task.id), 'not started while claimed ahead').toBe(false);
    const done = await settled(task.id);
    expect(done.status).toBe('done');
    expect(starts.get(task.id)!).toBeGreaterThanOrEqual(runAt);
  });

  it('lets the next batch claim while one waits only to commit: both orders held before the first runAt', async () => {
    service = await startTestService(db, { LOCK_AHEAD_MS: String(LEAD_MS), CONCURRENCY: '1' });
    const runAt = Date.now() + 1500;
    const [first, second] = [orders[2]!, orders[3]!];
    const tasks = [
      await create({ type: 'close_order', payload: { orderSn: first.orderSn }, runAt }),
      await create({ type: 'close_order', payload: { orderSn: second.orderSn }, runAt: runAt + 100 }),
    ];
    // Its timer fires 300 ms before the first runAt; with the one place taken until then, it could not claim.
    const held = await firstHeld('SELECT id FROM orders WHERE order_sn = ?', [second.orderSn], runAt);
    expect(held, "the second order was locked before the first task's runAt").toBeDefined();
    for (const task of tasks) expect((await settled(task.id)).status).toBe('done');
    const late = await closeLateness(
      db,
      tasks.map((task) => task.id),
    );
    for (const { late: ms } of late) expect(ms).toBeGreaterThanOrEqual(0);
    expect(
      await runsOf(
        db,
        tasks.map((task) => task.id),
      ),
    ).toEqual(new Map(tasks.map((task) => [task.id, 1])));
  });

  it('finds the connections of its batches open: the boot opened them (a handshake is several round trips)', async () => {
    service = await startTestService(db, { CONCURRENCY: '5', DB_POOL_SIZE: '12' });
    const { total } = await waitFor(
      async () => (service!.database.usage.total >= 6 ? service!.database.usage : undefined),
      5000,
      'CONCURRENCY + 1 connections open',
    );
    expect(total).toBeLessThanOrEqual(12);
  });

  it('with LOCK_AHEAD_MS=0, leaves the row alone until runAt', async () => {
    service = await startTestService(db, { LOCK_AHEAD_MS: '0' });
    const runAt = Date.now() + 1000;
    const order = orders[4]!;
    const task = await create({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt });
    expect(await firstHeld('SELECT id FROM orders WHERE order_sn = ?', [order.orderSn], runAt - 20)).toBeUndefined();
    expect((await settled(task.id)).status).toBe('done');
    expect(await runsOf(db, [task.id])).toEqual(new Map([[task.id, 1]]));
  });
});
