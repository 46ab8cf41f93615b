import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandler } from '../../src/handlers/handler.js';
import type { TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { checkShop, closeLateness, countStatus, createShopDatabase, makeOrders, runsOf } from '../helpers/shop.js';

let db: TestDatabase;
const services: TestService[] = [];
const orders = makeOrders(1200);

async function start(env: Record<string, string> = {}, handlers: DatabaseHandler[] = []): Promise<TestService> {
  const service = await startTestService(db, { REFILL_INTERVAL_MS: '100', ...env }, { handlers });
  services.push(service);
  return service;
}

async function lateness(ids: number[]): Promise<number[]> {
  return (await closeLateness(db, ids)).map((row) => row.late);
}

async function statusOf(id: number): Promise<string> {
  const [row] = await db.query<any[]>('SELECT status FROM punctual_tasks WHERE id = ?', [id]);
  return row?.status;
}

beforeAll(async () => {
  db = await createShopDatabase('scheduler', orders);
});

afterEach(async () => {
  await Promise.all(services.splice(0).map((service) => service.stop()));
});

afterAll(async () => {
  await db?.drop();
});

describe('rows inserted straight into the table', () => {
  it('runs a task a shop inserted by SQL in its own transaction, on time, whatever its session zone', async () => {
    await start();
    const shop = await db.pool.getConnection();
    let id: number;
    try {
      await shop.query("SET time_zone = '+08:00'");
      await shop.query('BEGIN');
      await shop.query("UPDATE orders SET status = 'unpaid' WHERE order_sn = ?", [orders[0]!.orderSn]);
      const [result] = await shop.query<import('mysql2').ResultSetHeader>(
        "INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('close_order', JSON_OBJECT('orderSn', ?), UTC_TIMESTAMP(3) + INTERVAL 700000 MICROSECOND)",
        [orders[0]!.orderSn],
      );
      id = result.insertId;
      await shop.query('COMMIT');
    } finally {
      shop.release();
    }
    await waitFor(async () => (await statusOf(id)) === 'done', 5000, 'the inserted task to run');
    const [row] = await db.query<any[]>('SELECT created_at, run_at, timezone, max_attempts, misfire FROM punctual_tasks WHERE id = ?', [id]);
    // The defaults wrote UTC although the shop's session was in +08:00.
    expect(Math.abs(row.created_at.getTime() - (row.run_at.getTime() - 700))).toBeLessThan(1000);
    expect(row).toMatchObject({ timezone: 'UTC', max_attempts: 4, misfire: 'run' });
    const [late] = await lateness([id]);
    // Never early; how close to on time is measured alone, in test/timing/in-process.test.ts.
    expect(late).toBeGreaterThanOrEqual(0);
  });

  it('runs a row whose insert commits after a higher id was already seen', async () => {
    // No reconcile while the test runs: the row is found by the scan looking at the id again.
    await start({ RECONCILE_INTERVAL_MS: String(24 * 3600_000) });
    const slow = await db.pool.getConnection();
    try {
      await slow.query('BEGIN');
      const [early] = await slow.query<import('mysql2').ResultSetHeader>(
        "INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('close_order', JSON_OBJECT('orderSn', ?), UTC_TIMESTAMP(3))",
        [orders[1]!.orderSn],
      );
      const [late] = await db.pool.query<import('mysql2').ResultSetHeader>(
        "INSERT INTO punctual_tasks (type, payload, run_at) VALUES ('close_order', JSON_OBJECT('orderSn', ?), UTC_TIMESTAMP(3))",
        [orders[2]!.orderSn],
      );
      expect(late.insertId).toBeGreaterThan(early.insertId);
      await waitFor(async () => (await statusOf(late.insertId)) === 'done', 5000, 'the committed row to run');
      await slow.query('COMMIT');
      const committedAt = Date.now();
      // Well before the minute-long reconcile: the id the scan jumped over is looked at again.
      await waitFor(async () => (await statusOf(early.insertId)) === 'done', 2000, 'the late row to run');
      expect(Date.now() - committedAt).toBeLessThan(2000);
    } finally {
      slow.release();
    }
  });

  it('runs rows committed out of id order with ids auto_increment_increment apart, as on a Galera cluster', async () => {
    const service = await start();
    // Three "nodes": connections that hand out ids 3 apart, each from its own offset.
    const nodes = await Promise.all([1, 2, 3].map(() => db.pool.getConnection()));
    const insert = async (node: number, rows: string[], dueInMs: number) => {
      const conn = nodes[node - 1]!;
      const [result] = await conn.query<import('mysql2').ResultSetHeader>(
        `INSERT INTO punctual_tasks (type, payload, run_at) VALUES ${rows.map(() => "('close_order', JSON_OBJECT('orderSn', ?), UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND)").join(', ')}`,
        rows.flatMap((orderSn) => [orderSn, dueInMs * 1000]),
      );
      return result.insertId;
    };
    try {
      for (const [i, conn] of nodes.entries()) {
        await conn.query('SET SESSION auto_increment_increment = 3, SESSION auto_increment_offset = ?', [i + 1]);
      }
      // Node 1 writes many rows, due tomorrow: two ids in three are never used.
      const far = Array.from({ length: 12_000 }, (_, i) => `far-${i}`);
      await insert(1, far, 86_400_000);
      // Node 2 starts a transaction and takes an id; node 3 commits higher ids first.
      await nodes[1]!.query('BEGIN');
      const lateId = await insert(2, [orders[20]!.orderSn], 0);
      const firstId = await insert(3, [orders[21]!.orderSn], 0);
      expect(firstId).toBeGreaterThan(lateId);
      expect(firstId % 3).not.toBe(lateId % 3);
      await waitFor(async () => (await statusOf(firstId)) === 'done', 5000, 'the row committed first to run');
      // More rows committed meanwhile, above the late one.
      const more = await insert(1, [orders[22]!.orderSn], 0);
      await waitFor(async () => (await statusOf(more)) === 'done', 5000, 'the next row to run');
      await nodes[1]!.query('COMMIT');
      // Well before the minute-long reconcile: the late row is found below the ids already seen.
      await waitFor(async () => (await statusOf(lateId)) === 'done', 3000, 'the row committed late to run');
    } finally {
      for (const conn of nodes) {
        await conn.query('SET SESSION auto_increment_increment = 1, SESSION auto_increment_offset = 1').catch(() => undefined);
        conn.release();
      }
    }
    expect(service.logs.some((line) => line.msg === 'reconciled')).toBe(false);
    await db.execute("DELETE FROM punctual_tasks WHERE JSON_UNQUOTE(JSON_EXTRACT(payload, '$.orderSn')) LIKE 'far-%'");
  });
});

describe('the horizon', () => {
  it('arms only tasks due within HORIZON_MS, and the rest as they come near, on time', async () => {
    const service = await start({ HORIZON_MS: '1500' });
    const near = await service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: orders[3]!.orderSn }, delayMs: 1000 });
    const far = await service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: orders[4]!.orderSn }, delayMs: 2500 });
    expect(service.timers.has(near.body.id)).toBe(true);
    expect(service.timers.has(far.body.id)).toBe(false);
    await waitFor(async () => service.timers.has(far.body.id), 2000, 'the far task to be armed');
    await waitFor(async () => (await statusOf(far.body.id)) === 'done', 4000, 'the far task to run');
    // Never early; how close to on time is measured alone, in test/timing/in-process.test.ts.
    for (const late of await lateness([near.body.id, far.body.id])) expect(late).toBeGreaterThanOrEqual(0);
  });
});

describe('boot', () => {
  it('skips misfired tasks that asked for it, runs the others, and leaves those within the grace', async () => {
    const insert = async (orderSn: string, agoMs: number, misfire: string) => {
      const result = await db.execute(
        `INSERT INTO punctual_tasks (type, payload, run_at, misfire) VALUES ('close_order', JSON_OBJECT('orderSn', ?), UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND, ?)`,
        [orderSn, agoMs * 1000, misfire],
      );
      return result.insertId;
    };
    // Due while the service was down.
    const skipped = await insert(orders[5]!.orderSn, 120_000, 'skip');
    const run = await insert(orders[6]!.orderSn, 120_000, 'run');
    const withinGrace = await insert(orders[7]!.orderSn, 2_000, 'skip');
    await start({ MISFIRE_GRACE_MS: '30000' });
    await waitFor(async () => (await statusOf(run)) === 'done' && (await statusOf(withinGrace)) === 'done', 5000, 'the misfired tasks');
    expect(await statusOf(skipped)).toBe('skipped');
    const [row] = await db.query<any[]>('SELECT last_error, finished_at FROM punctual_tasks WHERE id = ?', [skipped]);
    expect(row.last_error).toContain('skipped');
    expect(row.finished_at).not.toBeNull();
    const [order] = await db.query<any[]>('SELECT status FROM orders WHERE order_sn = ?', [orders[5]!.orderSn]);
    expect(order.status).toBe('unpaid');
  });
});

describe('database trouble', () => {
  let sleeps = 0;
  /** Writes, then sleeps inside the task's transaction the first time, so a test can cut it there. */
  const writeAndSleep = testHandler('write_and_sleep', async ({ conn, task }) => {
    await conn.query('INSERT INTO side_effects (task_id) VALUES (?)', [task.id]);
    if (sleeps++ === 0) await conn.query('SELECT SLEEP(3)');
  });

  it('a connection cut mid-transaction rolls the run back; the task runs again, once, without using an attempt', async () => {
    await db.execute('CREATE TABLE IF NOT EXISTS side_effects (task_id BIGINT NOT NULL)');
    const service = await start({}, [writeAndSleep]);
    const { body } = await service.call('POST', '/tasks', { type: 'write_and_sleep', payload: {}, delayMs: 0 });
    const [sleeper] = await waitFor(
      async () => {
        const found = await db.query<any[]>(
          "SELECT id FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE 'SELECT SLEEP%'",
        );
        return found.length > 0 ? found : undefined;
      },
      5000,
      'the handler to sleep',
    );
    await db.execute(`KILL CONNECTION ${Number(sleeper.id)}`);
    await waitFor(async () => (await statusOf(body.id)) === 'done', 5000, 'the task to run again');
    const [row] = await db.query<any[]>('SELECT attempts, last_error FROM punctual_tasks WHERE id = ?', [body.id]);
    expect(row).toEqual({ attempts: 1, last_error: null });
    expect(await db.query<any[]>('SELECT * FROM side_effects WHERE task_id = ?', [body.id])).toHaveLength(1);
    // Lost before its COMMIT went out, the batch wrote nothing: run again at once on another
    // connection (not put back on the timers), and not counted as a failed run.
    const metrics = parsePrometheus((await service.app.inject({ url: '/metrics' })).body);
    expect(metrics.get('punctual_task_retries_total{type="write_and_sleep"}') ?? 0).toBe(0);
  });

  it('goes on after every one of its connections is killed, again and again, while tasks fire', async () => {
    const service = await start({ CONCURRENCY: '2' });
    const batch = orders.slice(100, 400);
    const first = Date.now() + 500;
    const ids: number[] = [];
    for (const [i, order] of batch.entries()) {
      ids.push(
        (await service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: order.orderSn }, runAt: first + i * 5 })).body.id,
      );
    }
    // Each round kills the connections the service opened since the last one, once it has: all
    // queries here go through one connection of the test's own, so every other one is the service's.
    const killer = await db.pool.getConnection();
    const killed = new Set<number>();
    try {
      for (let round = 0; round < 10; round++) {
        const conns = await waitFor(
          async () => {
            const [rows] = await killer.query<any[]>(
              'SELECT id FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND id <> CONNECTION_ID()',
            );
            const fresh = rows.map((row) => Number(row.id)).filter((id) => !killed.has(id));
            return fresh.length > 0 && fresh;
          },
          10_000,
          'the service to connect again',
        );
        for (const id of conns) {
          killed.add(id);
          await killer.query(`KILL CONNECTION ${id}`).catch(() => undefined);
        }
      }
    } finally {
      killer.release();
    }
    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 15_000, 'every task to run');
    expect((await service.call('GET', '/readyz')).status).toBe(200);
    const check = await checkShop(db, orders);
    expect(check.ranTwice).toBe(0);
    expect(check.stockMatches).toBe(true);
    const attempts = await db.query<any[]>('SELECT MAX(attempts) AS most FROM punctual_tasks WHERE id IN (?)', [ids]);
    expect(Number(attempts[0].most)).toBe(1);
  });
});

describe('two processes on one database', () => {
  it('never run one task twice', async () => {
    const a = await start({ CONCURRENCY: '3', BATCH_SIZE: '20' });
    const b = await start({ CONCURRENCY: '3', BATCH_SIZE: '20' });
    const batch = orders.slice(400, 1200);
    const due = Date.now() + 800;
    const ids: number[] = [];
    for (const [i, order] of batch.entries()) {
      const via = i % 2 === 0 ? a : b;
      ids.push(
        (await via.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: order.orderSn }, runAt: due + (i % 400) * 2 })).body
          .id,
      );
    }
    // Both arm every task: A armed its own, B finds A's through its refill, and the other way round.
    await waitFor(async () => a.timers.size + b.timers.size >= ids.length * 2 || Date.now() > due, 3000, 'both to arm');
    await waitFor(async () => (await countStatus(db, 'done', ids)) === ids.length, 15_000, 'every task to run');
    // Each ran some (its own run counter), and together each task once (one ledger row each).
    const ranBy = async (service: TestService) =>
      (await service.runMetrics.runs.get()).values.find((v) => v.labels.type === 'close_order' && v.labels.outcome === 'done')?.value ?? 0;
    expect(await ranBy(a)).toBeGreaterThan(0);
    expect(await ranBy(b)).toBeGreaterThan(0);
    expect(await runsOf(db, ids)).toEqual(new Map(ids.map((id) => [id, 1])));
    const check = await checkShop(db, orders);
    expect(check.ranTwice).toBe(0);
    expect(check.stockMatches).toBe(true);
  });
});

describe('stop', () => {
  const slow = testHandler('slow', async ({ conn }) => {
    await conn.query('SELECT SLEEP(0.8)');
  });

  it('lets a running handler finish, then stops; calling stop twice is safe', async () => {
    const service = await start({}, [slow]);
    const { body } = await service.call('POST', '/tasks', { type: 'slow', payload: {}, delayMs: 0 });
    await waitFor(async () => service.dispatcher.running > 0, 2000, 'the handler to start');
    const stopping = [service.stop(), service.stop()];
    expect(stopping[0]).toBe(stopping[1]);
    await Promise.all(stopping);
    expect(await statusOf(body.id)).toBe('done');
    expect(service.timers.size).toBe(0);
  });
});
