import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/handlers/handler.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { checkShop, createShop, insertOrders, makeOrders, type Order, runsOf } from '../helpers/shop.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('dispatch');
const orders: Order[] = makeOrders(60);

/** Runs of the test handlers: which task, which attempt, when. */
const runs: { id: number; attempt: number; at: number }[] = [];

/** Writes a row in the task's transaction, then throws: the write must not survive. */
const writeThenThrow = testHandler('write_then_throw', async ({ tx, task }) => {
  runs.push({ id: task.id, attempt: task.attempts + 1, at: Date.now() });
  await tx.execute(sql`INSERT INTO side_effects (task_id) VALUES (${task.id})`);
  throw new Error('boom');
});

const refuse = testHandler('refuse', async ({ task }) => {
  runs.push({ id: task.id, attempt: task.attempts + 1, at: Date.now() });
  throw new PermanentError('this order can never be closed');
});

/** Hangs past its timeout on the first attempt, then succeeds. */
const slowFirst = testHandler(
  'slow_first',
  async ({ tx, task }) => {
    runs.push({ id: task.id, attempt: task.attempts + 1, at: Date.now() });
    if (task.attempts === 0) await tx.execute(sql`SELECT SLEEP(5)`);
    await tx.execute(sql`INSERT INTO side_effects (task_id) VALUES (${task.id})`);
  },
  300,
);

async function task(id: number) {
  return (await fixture.service!.call('GET', `/tasks/${id}`)).body;
}

async function create(body: Record<string, unknown>) {
  const answer = await fixture.service!.call('POST', '/tasks', body);
  expect(answer.status).toBe(201);
  return answer.body;
}

function settled(id: number, statuses = ['done', 'failed']) {
  return waitFor(
    async () => {
      const t = await task(id);
      return statuses.includes(t.status) ? t : undefined;
    },
    15_000,
    `task ${id} to settle`,
  );
}

beforeAll(async () => {
  await createShop(fixture.db);
  await insertOrders(fixture.db, orders);
  await fixture.db.execute("UPDATE orders SET status = 'paid' WHERE order_sn = ?", [orders[1]!.orderSn]);
  await fixture.db.execute('CREATE TABLE side_effects (task_id BIGINT NOT NULL)');
  await fixture.db.execute('CREATE TABLE scratch (id INT PRIMARY KEY, v INT NOT NULL)');
  await fixture.db.execute('INSERT INTO scratch (id, v) VALUES ?', [Array.from({ length: 200 }, (_, i) => [i + 1, 0])]);
});

describe('close_order', () => {
  it('closes an unpaid order at its time and puts its stock back, exactly once', async () => {
    fixture.service = await fixture.start({}, { handlers: [] });
    const [unpaid, paid] = orders;
    const due = Date.now() + 300;
    const closeUnpaid = await create({ type: 'close_order', payload: { orderSn: unpaid!.orderSn }, runAt: due });
    const closePaid = await create({ type: 'close_order', payload: { orderSn: paid!.orderSn }, runAt: due });
    const closeMissing = await create({ type: 'close_order', payload: { orderSn: 'SN-NOPE' }, runAt: due });
    // The same order twice: the second close finds it closed already.
    const closeAgain = await create({ type: 'close_order', payload: { orderSn: unpaid!.orderSn }, runAt: due + 50 });

    for (const t of [closeUnpaid, closePaid, closeMissing, closeAgain]) {
      const done = await settled(t.id);
      expect(done).toMatchObject({ status: 'done', attempts: 1, lastError: null });
      expect(Date.parse(done.finishedAt)).toBeGreaterThanOrEqual(Date.parse(done.runAt));
    }
    const [order] = await fixture.db.query<any[]>('SELECT status, closed_at FROM orders WHERE order_sn = ?', [unpaid!.orderSn]);
    expect(order.status).toBe('closed');
    expect(order.closed_at.getTime()).toBeGreaterThanOrEqual(due);
    const [stillPaid] = await fixture.db.query<any[]>('SELECT status, closed_at FROM orders WHERE order_sn = ?', [paid!.orderSn]);
    expect(stillPaid).toMatchObject({ status: 'paid', closed_at: null });
    const check = await checkShop(fixture.db, orders);
    expect(check).toMatchObject({ closed: 1, ranTwice: 0, stockMatches: true });
    // Every one of them ran exactly once, the paid and the missing order's too: the ledger's rows.
    const ids = [closeUnpaid, closePaid, closeMissing, closeAgain].map((t) => t.id as number);
    expect(await runsOf(fixture.db, ids)).toEqual(new Map(ids.map((id) => [id, 1])));
  });

  it('locks goods in id order: many closes sharing goods all commit, stock adds up', async () => {
    fixture.service = await fixture.start({ CONCURRENCY: '4', BATCH_SIZE: '5' });
    const batch = orders.slice(2, 52);
    const due = Date.now() + 300;
    const created = [];
    for (const order of batch) created.push(await create({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: due }));
    for (const t of created) expect(await settled(t.id)).toMatchObject({ status: 'done', attempts: 1 });
    const check = await checkShop(fixture.db, orders);
    expect(check).toMatchObject({ closed: 51, ranTwice: 0, stockMatches: true });
    const ids = created.map((t) => t.id as number);
    expect(await runsOf(fixture.db, ids)).toEqual(new Map(ids.map((id) => [id, 1])));
  });
});

describe('failures', () => {
  it("rolls back a failing handler's writes; the rest of its batch still commits", async () => {
    fixture.service = await fixture.start({ MAX_ATTEMPTS: '1' }, { handlers: [writeThenThrow] });
    const due = Date.now() + 300;
    const failing = await create({ type: 'write_then_throw', payload: {}, runAt: due });
    const closing = await create({ type: 'close_order', payload: { orderSn: orders[55]!.orderSn }, runAt: due });
    expect(await settled(closing.id)).toMatchObject({ status: 'done' });
    const failed = await settled(failing.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, lastError: 'boom' });
    expect(failed.finishedAt).not.toBeNull();
    expect(await fixture.db.query<any[]>('SELECT * FROM side_effects WHERE task_id = ?', [failing.id])).toEqual([]);
  });

  it('retries with exponential backoff until maxAttempts, then fails and stays visible', async () => {
    fixture.service = await fixture.start({ RETRY_BASE_MS: '200' }, { handlers: [writeThenThrow] });
    runs.length = 0;
    const t = await create({ type: 'write_then_throw', payload: {}, delayMs: 0, maxAttempts: 3 });
    const failed = await settled(t.id, ['failed']);
    expect(failed).toMatchObject({ status: 'failed', attempts: 3, lastError: 'boom' });
    const mine = runs.filter((run) => run.id === t.id);
    expect(mine.map((run) => run.attempt)).toEqual([1, 2, 3]);
    // Never before the backoff (the gaps' upper bounds are timing: test/timing/in-process.test.ts).
    const gaps = [mine[1]!.at - mine[0]!.at, mine[2]!.at - mine[1]!.at];
    expect(gaps[0]).toBeGreaterThanOrEqual(200);
    expect(gaps[1]).toBeGreaterThanOrEqual(400);
    expect(await fixture.db.query<any[]>('SELECT * FROM side_effects WHERE task_id = ?', [t.id])).toEqual([]);
    const pending = await fixture.service.call('GET', '/tasks/pending');
    expect(pending.body.tasks.map((p: { id: number }) => p.id)).not.toContain(t.id);
  });

  it('fails a task at once on an error a retry cannot fix', async () => {
    fixture.service = await fixture.start({}, { handlers: [refuse] });
    const t = await create({ type: 'refuse', payload: {}, delayMs: 0, maxAttempts: 5 });
    expect(await settled(t.id)).toMatchObject({ status: 'failed', attempts: 1, lastError: 'this order can never be closed' });
  });

  it('fails a row someone inserted with an unknown type or a bad payload, without running anything', async () => {
    fixture.service = await fixture.start({ REFILL_INTERVAL_MS: '100' });
    await fixture.db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('no_such_type', '{}', UTC_TIMESTAMP(3)), ('close_order', '{"orderSn": 7}', UTC_TIMESTAMP(3))`,
    );
    const rows = await waitFor(async () => {
      const found = await fixture.db.query<any[]>(
        "SELECT type, status, last_error FROM punctual_tasks WHERE type IN ('no_such_type', 'close_order') AND status = 'failed' ORDER BY id",
      );
      return found.length === 2 ? found : undefined;
    });
    expect(rows[0]).toMatchObject({ status: 'failed', last_error: 'no handler for type "no_such_type"' });
    expect(rows[1]).toMatchObject({ status: 'failed', last_error: 'payload/orderSn must be string' });
  });

  it('keeps a task whose row makes the batch fail from holding back the tasks batched with it', async () => {
    fixture.service = await fixture.start({ BATCH_SIZE: '20', CONCURRENCY: '1' });
    // The shop's trigger refuses to let one task's row be completed: every batch holding it fails.
    await fixture.db.execute(
      `CREATE TRIGGER poison BEFORE UPDATE ON punctual_tasks FOR EACH ROW
         IF JSON_VALUE(NEW.payload, '$.orderSn') = 'SN-POISON' AND NEW.status <> OLD.status THEN
           SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the shop';
         END IF`,
    );
    const due = Date.now() + 500;
    const poisoned = await create({ type: 'close_order', payload: { orderSn: 'SN-POISON' }, runAt: due });
    const created = [];
    for (const order of orders.slice(52, 55)) {
      created.push(await create({ type: 'close_order', payload: { orderSn: order.orderSn }, runAt: due }));
    }
    try {
      // In the first round, not after the poisoned batch's growing delays (100, 250, 500, 1000 ms…).
      for (const t of created) {
        const done = await settled(t.id);
        expect(done).toMatchObject({ status: 'done', attempts: 1 });
        expect(done.latenessMs).toBeLessThan(1000);
      }
      expect((await task(poisoned.id)).status).toBe('pending');
    } finally {
      await fixture.db.execute('DROP TRIGGER poison');
    }
    expect(await settled(poisoned.id)).toMatchObject({ status: 'done' });
  });

  it('kills a handler that overruns its time, and retries it', async () => {
    fixture.service = await fixture.start({}, { handlers: [slowFirst] });
    const t = await create({ type: 'slow_first', payload: {}, delayMs: 0 });
    const done = await settled(t.id, ['done']);
    // lastError describes the latest run, which succeeded; the overrun is in the run history.
    expect(done).toMatchObject({ status: 'done', attempts: 2, lastError: null });
    const runs = (await fixture.service.call('GET', `/tasks/${t.id}/runs`)).body.runs;
    expect(runs.map((run: any) => [run.attempt, run.outcome, run.error])).toEqual([
      [2, 'done', null],
      [1, 'retry', 'handler timed out after 300 ms'],
    ]);
    expect(await fixture.db.query<any[]>('SELECT * FROM side_effects WHERE task_id = ?', [t.id])).toHaveLength(1);
    // The killed connection is gone; the service goes on.
    expect((await fixture.service.call('GET', '/readyz')).status).toBe(200);
  });
});

describe('lock conflicts are retried transparently', () => {
  it('waits out a lock-wait timeout without counting an attempt', async () => {
    fixture.service = await fixture.start({ LOCK_WAIT_TIMEOUT_S: '1' });
    const order = orders[56]!;
    const goodsId = order.items[0]!.goods_id;
    const shop = await fixture.db.pool.getConnection();
    try {
      await shop.query('BEGIN');
      await shop.query('SELECT stock FROM goods WHERE id = ? FOR UPDATE', [goodsId]);
      const t = await create({ type: 'close_order', payload: { orderSn: order.orderSn }, delayMs: 0 });
      // At least two lock-wait timeouts of the close, seen in the database: its UPDATE of the goods
      // waiting for the shop's lock, then a fresh statement waiting again (its clock restarts).
      // PROCESSLIST is read live; INNODB_TRX is a cached snapshot that can miss a wait entirely.
      const [[me]] = await shop.query<any[]>('SELECT CONNECTION_ID() AS id');
      const waited = new Map<number, number>();
      let waits = 0;
      await waitFor(
        async () => {
          const [rows] = await fixture.db.pool.query<any[]>(
            `SELECT ID AS thread, TIME_MS AS ms FROM information_schema.PROCESSLIST
              WHERE DB = ? AND ID <> ? AND INFO LIKE 'UPDATE \`goods\`%'`,
            [fixture.db.name, me.id],
          );
          for (const row of rows) {
            const before = waited.get(Number(row.thread));
            if (before === undefined || Number(row.ms) < before) waits++;
            waited.set(Number(row.thread), Number(row.ms));
          }
          return waits >= 3;
        },
        20_000,
        'two lock-wait timeouts of the close',
      );
      expect((await task(t.id)).attempts).toBe(0);
      expect((await task(t.id)).status).toBe('pending');
      await shop.query('COMMIT');
      expect(await settled(t.id)).toMatchObject({ status: 'done', attempts: 1, lastError: null });
    } finally {
      // A failed test must not leave the shop's locks behind for the next one.
      await shop.query('ROLLBACK');
      shop.release();
    }
    expect(await checkShop(fixture.db, orders)).toMatchObject({ ranTwice: 0, stockMatches: true });
  });

  it('retries a deadlock without counting an attempt', async () => {
    fixture.service = await fixture.start({ LOCK_WAIT_TIMEOUT_S: '10' });
    const order = orders[57]!;
    const goodsId = Math.max(...order.items.map((item) => item.goods_id));
    const deadlocks = async () => Number((await fixture.db.query<any[]>("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'"))[0]?.Value);
    const deadlocksBefore = await deadlocks();
    const shop = await fixture.db.pool.getConnection();
    try {
      // The shop's transaction is the heavier one, so InnoDB picks the close as the victim.
      await shop.query('BEGIN');
      await shop.query('UPDATE scratch SET v = v + 1');
      await shop.query('SELECT stock FROM goods WHERE id = ? FOR UPDATE', [goodsId]);
      const t = await create({ type: 'close_order', payload: { orderSn: order.orderSn }, delayMs: 0 });
      // The close locks the order, then waits for the goods row the shop holds…
      await waitFor(
        async () => {
          const waiting = await fixture.db.query<any[]>(
            "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE 'UPDATE `goods`%'",
          );
          return Number(waiting[0].n) > 0;
        },
        5000,
        'the close to wait for the goods lock',
      );
      // …and the shop now wants the order: a deadlock.
      await shop.query('SELECT status FROM orders WHERE order_sn = ? FOR UPDATE', [order.orderSn]);
      await shop.query('COMMIT');
      expect(await settled(t.id)).toMatchObject({ status: 'done', attempts: 1, lastError: null });
    } finally {
      // A failed test must not leave the shop's locks behind for the next one.
      await shop.query('ROLLBACK');
      shop.release();
    }
    // InnoDB found the deadlock, and the shop's statement was not its victim: the close was.
    expect(await deadlocks()).toBeGreaterThan(deadlocksBefore);
    const [closed] = await fixture.db.query<any[]>('SELECT status FROM orders WHERE order_sn = ?', [order.orderSn]);
    expect(closed.status).toBe('closed');
    expect(await checkShop(fixture.db, orders)).toMatchObject({ ranTwice: 0, stockMatches: true });
  });
});
