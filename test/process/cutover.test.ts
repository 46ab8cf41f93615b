/**
 * docs/migrating.md as a shop runs it: moving off a Redis ZSET consumer, and off an async_task
 * poller, without closing an order twice or losing one. Each run has a real MariaDB, Redis and
 * punctual (started as a process), the shop's old consumer (test/helpers/old-consumers.ts: the
 * write-ups' loop, locking each order before it reads its status) and a shop that keeps placing
 * orders, and paying some, through the whole move:
 *
 * 1. the old consumer runs, with a backlog (some of it overdue) and, as a process that died
 *    mid-batch leaves them, a few orders it took and never finished (in the processing hash; at
 *    async_task status 1);
 * 2. punctual starts; the shop's servers switch one by one to creating punctual tasks (some still
 *    write the old queue for a while);
 * 3. the doc's import runs, with the old consumer still running; both run side by side for seconds,
 *    each closing orders the other holds too;
 * 4. the old consumer stops; the doc's step 5 (what it took and never finished back, the import
 *    again) runs as written, and once more must create nothing.
 *
 * Then every order is counted in the shop's ledger (a trigger row per UPDATE that leaves an order
 * closed, with who closed it): each order unpaid at its due time closed exactly once, none left
 * unpaid, no paid order closed, and the stock put back once per closed order. The doc's commands
 * run through bash as written (the queue names made the test's own, the schema the test's), and
 * so does its close_order_by_id procedure, for an async_task table whose params say
 * `{"order_id": …}`.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import type mysql from 'mysql2/promise';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { AsyncTaskPoller, ZsetConsumer } from '../helpers/old-consumers.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { checkShop, createShop, makeOrders, type Order } from '../helpers/shop.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/punctual.mjs', import.meta.url));
const DOC = readFileSync(new URL('../../docs/migrating.md', import.meta.url), 'utf8');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The fenced blocks of the doc in `lang` that contain every one of `texts`. */
function docBlock(lang: string, ...texts: string[]): string {
  const found = [...DOC.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)]
    .filter(([, blockLang, text]) => blockLang === lang && texts.every((t) => text!.includes(t)))
    .map(([, , text]) => text!.trim());
  expect(found.length, `docs/migrating.md has a ${lang} block with ${texts.join(' and ')}`).toBeGreaterThan(0);
  return found[0]!;
}

/** Runs a shell block of the doc with bash, `punctual` being this checkout's command against `server`. */
function shell(script: string, server: ServerProcess): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['--norc', '--noprofile', '-c', `set -euo pipefail\npunctual() { "$NODE" "$PUNCTUAL_BIN" "$@"; }\n${script}`],
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', NODE: process.execPath, PUNCTUAL_BIN: BIN, PUNCTUAL_URL: server.baseUrl },
        timeout: 60_000,
      },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr }),
    );
  });
}

/** What a run of the import printed: created, already there, refused. */
function counted(output: { stdout: string; stderr: string }): { created: number; there: number; refused: number } {
  const match = /created (\d+), already there (\d+)(?: \([^)]*\))?, refused (\d+)/.exec(output.stdout);
  expect(match, `an import's summary line: ${output.stdout}${output.stderr}`).not.toBeNull();
  return { created: Number(match![1]), there: Number(match![2]), refused: Number(match![3]) };
}

/** The statements of a `DELIMITER //` script, GRANTs left out, `shop.` made `schema`. */
function statements(script: string, schema: string): string[] {
  return script
    .split('\n')
    .filter((line) => !/^DELIMITER\b/.test(line) && !/^GRANT\b/.test(line))
    .join('\n')
    .split('//')
    .map((statement) => statement.trim())
    .filter((statement) => statement !== '')
    .map((statement) => statement.replace(/\bshop\./g, `\`${schema}\`.`));
}

/**
 * The shop's ledger of effects: a row each time an UPDATE leaves an order closed, with who did it
 * (the old consumer's connection sets @closer; punctual's sets nothing). A second close of one order
 * is a second row, never silent.
 */
async function createLedger(db: TestDatabase): Promise<void> {
  await db.execute(
    'CREATE TABLE order_closes (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL, closer VARCHAR(16) NOT NULL, KEY (order_sn))',
  );
  await db.execute(`CREATE TRIGGER orders_closes AFTER UPDATE ON orders FOR EACH ROW
    INSERT INTO order_closes (order_sn, closer) SELECT NEW.order_sn, COALESCE(@closer, 'punctual') FROM DUAL WHERE NEW.status = 'closed'`);
}

type Phase = 'old' | 'mixed' | 'new';

/**
 * The shop: an order every 40 ms, due 2 to 6 s later, its close queued the old way, the new way,
 * or (while the servers switch over) each server its own way; one order in ten paid before it is due.
 */
class Shop {
  phase: Phase = 'old';
  placed: Order[] = [];
  /** Orders the shop paid before their close came: none may end closed. */
  readonly paid: string[] = [];
  readonly #pool: Order[];
  #running = true;
  #loop: Promise<void> | undefined;
  #payments: Promise<unknown>[] = [];
  readonly errors: Error[] = [];

  constructor(
    private readonly db: TestDatabase,
    pool: Order[],
    private readonly enqueue: (
      phase: 'old' | 'new',
      order: Order,
      orderId: number,
      dueSeconds: number,
      conn: mysql.PoolConnection,
    ) => Promise<void>,
  ) {
    this.#pool = [...pool];
  }

  start(): void {
    this.#loop = (async () => {
      for (let n = 0; this.#running; n++) {
        const order = this.#pool.shift();
        if (order === undefined) throw new Error('the shop ran out of orders');
        await this.#place(order, n).catch((error: Error) => this.errors.push(error));
        await sleep(40);
      }
    })();
  }

  async #place(order: Order, n: number): Promise<void> {
    const way = this.phase === 'mixed' ? (n % 2 === 0 ? 'old' : 'new') : this.phase;
    const due = Math.floor(Date.now() / 1000) + 2 + (n % 5);
    const conn = await this.db.pool.getConnection();
    try {
      // The order and (the new way, as Enqueue::inTransaction does) its close, in one transaction.
      await conn.query('BEGIN');
      const [result] = await conn.query<mysql.ResultSetHeader>("INSERT INTO orders (order_sn, status, items) VALUES (?, 'unpaid', ?)", [
        order.orderSn,
        JSON.stringify(order.items),
      ]);
      if (way === 'new') await this.enqueue('new', order, result.insertId, due, conn);
      await conn.query('COMMIT');
      this.placed.push(order);
      // The old way queues after the commit, as the write-ups insist.
      if (way === 'old') await this.enqueue('old', order, result.insertId, due, conn);
    } finally {
      conn.release();
    }
    if (n % 10 === 3) {
      this.#payments.push(
        sleep(300 + (n % 7) * 150)
          .then(() => this.db.execute("UPDATE orders SET status = 'paid' WHERE order_sn = ? AND status = 'unpaid'", [order.orderSn]))
          .then((paid) => {
            if (paid.affectedRows === 1) this.paid.push(order.orderSn);
          }),
      );
    }
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
    await Promise.all(this.#payments);
  }
}

interface Run {
  db: TestDatabase;
  /** The shop and the old consumer, stopped when a test fails midway (each stop is harmless twice). */
  loops: { stop(): Promise<void> }[];
  server?: ServerProcess;
  redis?: Redis;
  keys?: string[];
}
const runs: Run[] = [];

afterEach(async () => {
  for (const run of runs.splice(0)) {
    for (const loop of run.loops) await loop.stop().catch(() => undefined);
    await run.server?.stop();
    if (run.redis !== undefined) {
      if (run.keys !== undefined) await run.redis.del(...run.keys);
      run.redis.disconnect();
    }
    await run.db.drop();
  }
});

afterAll(async () => {
  for (const run of runs) await run.db.drop();
});

/** Places the backlog: orders in the old queue due from 3 s ago to 10 s ahead, one in ten paid. */
async function placeBacklog(
  db: TestDatabase,
  orders: Order[],
  enqueue: (order: Order, orderId: number, due: number) => Promise<void>,
): Promise<Order[]> {
  const now = Math.floor(Date.now() / 1000);
  for (const [i, order] of orders.entries()) {
    const [result] = await db.pool.query<mysql.ResultSetHeader>('INSERT INTO orders (order_sn, status, items) VALUES (?, ?, ?)', [
      order.orderSn,
      i % 10 === 7 ? 'paid' : 'unpaid',
      JSON.stringify(order.items),
    ]);
    await enqueue(order, result.insertId, now - 3 + (i % 14));
  }
  return orders;
}

/**
 * Waits until no order is unpaid and no close task is pending, then counts: every closed order has
 * exactly one ledger row, none is left unpaid, no paid order was closed, the stock adds up.
 */
async function checkEveryOrderOnce(
  db: TestDatabase,
  orders: Order[],
  paid: string[],
): Promise<{ old: number; punctual: number; punctualSecond: number }> {
  const unpaid = async () =>
    (await db.query<any[]>("SELECT order_sn FROM orders WHERE status = 'unpaid' ORDER BY order_sn")).map((row) => row.order_sn);
  // The last orders are due 6 s after the shop stopped: a close left undone shows as an unpaid order by name.
  await waitFor(async () => (await unpaid()).length === 0, 20_000, 'every order closed or paid').catch(() => undefined);
  expect(await unpaid(), 'orders never closed (lost)').toEqual([]);
  await waitFor(
    async () =>
      Number(
        (
          await db.query<any[]>(
            "SELECT COUNT(*) AS n FROM punctual_tasks WHERE status IN ('pending', 'running') AND run_at <= UTC_TIMESTAMP(3)",
          )
        )[0].n,
      ) === 0,
    20_000,
    'every due task to finish',
  );
  const twice = await db.query<any[]>(
    'SELECT order_sn, GROUP_CONCAT(closer) AS closers FROM order_closes GROUP BY order_sn HAVING COUNT(*) > 1',
  );
  expect(twice, 'orders closed more than once').toEqual([]);
  const [counts] = await db.query<any[]>(
    `SELECT (SELECT COUNT(*) FROM orders WHERE status = 'closed') AS closed,
            (SELECT COUNT(*) FROM order_closes) AS closes,
            (SELECT COUNT(*) FROM order_closes WHERE closer = 'old') AS byOld,
            (SELECT COUNT(*) FROM order_closes WHERE closer = 'punctual') AS byPunctual`,
  );
  expect(Number(counts.closed)).toBeGreaterThan(orders.length / 2);
  expect(Number(counts.closes), 'a ledger row per closed order').toBe(Number(counts.closed));
  expect(paid.length).toBeGreaterThan(0);
  const paidClosed = await db.query<any[]>("SELECT order_sn FROM orders WHERE status <> 'paid' AND order_sn IN (?)", [paid]);
  expect(paidClosed, 'paid orders closed').toEqual([]);
  const shop = await checkShop(db, orders);
  expect(
    shop.stockMatches,
    `stock: expected ${JSON.stringify([...shop.expectedStock])}, got ${JSON.stringify([...shop.actualStock])}`,
  ).toBe(true);
  const failed = await db.query<any[]>("SELECT id, type, last_error FROM punctual_tasks WHERE status = 'failed'");
  expect(failed, 'failed tasks').toEqual([]);
  // Orders the old consumer closed and punctual ran a close for too, after: punctual came second.
  const [second] = await db.query<any[]>(
    `SELECT COUNT(DISTINCT o.id) AS n FROM punctual_tasks t
       JOIN orders o ON o.order_sn = JSON_VALUE(t.payload, '$.orderSn') OR o.id = JSON_VALUE(t.payload, '$.order_id')
       JOIN order_closes c ON c.order_sn = o.order_sn AND c.closer = 'old'
      WHERE t.status = 'done'`,
  );
  return { old: Number(counts.byOld), punctual: Number(counts.byPunctual), punctualSecond: Number(second.n) };
}

describe('moving off a Redis ZSET consumer (docs/migrating.md)', () => {
  it('closes every order exactly once through the cutover, with both running through the import, none lost', async () => {
    const db = await createTestDatabase('cutover_zset');
    const redis = new Redis('redis://127.0.0.1:6379/0');
    const prefix = `cutover-${randomBytes(4).toString('hex')}:`;
    const queue = `${prefix}queue:order:timeout`;
    const processing = `${prefix}queue:order:processing`;
    const run: Run = { db, loops: [], redis, keys: [queue, processing] };
    runs.push(run);
    await createShop(db);
    await createLedger(db);
    const orders = makeOrders(900, 20, 'SN');
    const backlog = await placeBacklog(db, orders.slice(0, 200), (order, _id, due) =>
      redis.zadd(queue, due, order.orderSn).then(() => undefined),
    );
    // A consumer that died mid-batch: taken off the queue into the processing hash, never closed.
    const residue = await placeBacklog(db, orders.slice(200, 205), (order, _id, due) =>
      redis.hset(processing, order.orderSn, due).then(() => undefined),
    );
    await db.execute('UPDATE orders SET status = ? WHERE order_sn IN (?)', ['unpaid', residue.map((order) => order.orderSn)]);

    // Its host's clock 100 ms ahead of punctual's: with its 200 ms round, it takes a due order before punctual about half the time.
    const old = new ZsetConsumer(db.url, redis, queue, processing, 100);
    await old.start();
    const started: { server?: ServerProcess } = {};
    const shop = new Shop(db, orders.slice(205), async (way, order, _id, due) => {
      if (way === 'old') await redis.zadd(queue, due, order.orderSn);
      else {
        // Step 2: the same key the import gives the member, due the same second.
        const created = await started.server!.request('POST', '/tasks', {
          type: 'close_order',
          payload: { orderSn: order.orderSn },
          runAt: due * 1000,
          key: `close_order:${order.orderSn}`,
        });
        if (created.status !== 201) throw new Error(`POST /tasks answered ${created.status}: ${JSON.stringify(created.body)}`);
      }
    });
    shop.start();
    run.loops.push(shop, old);

    // Step 1: punctual on the shop's database.
    const server = await startServer({ env: { DATABASE_URL: db.url } });
    run.server = started.server = server;
    // Step 2: the servers switch over one by one.
    shop.phase = 'mixed';
    await sleep(1000);
    // Step 3: the import, the old consumer still running.
    const ours = (script: string) => script.replaceAll('queue:order:', `${prefix}queue:order:`);
    const importBlock = ours(docBlock('sh', 'punctual import --from-zset', '--type close_order'));
    expect(importBlock.split('\n')).toHaveLength(1);
    const first = await shell(importBlock, server);
    expect([first.code, first.stderr]).toEqual([0, '']);
    expect(counted(first)).toMatchObject({ refused: 0 });
    expect(counted(first).created).toBeGreaterThan(50);
    await sleep(1000);
    shop.phase = 'new';
    // Both run side by side: the orders the queue holds are due for both.
    await sleep(3000);
    // Step 4: the old consumer stops, gracefully.
    await old.stop();
    // Step 5, as written: what it took and never finished back in the queue, and the import again.
    const last = await shell(ours(docBlock('sh', 'HKEYS queue:order:processing', 'punctual import --from-zset')), server);
    expect([last.code, last.stderr]).toEqual([0, '']);
    expect(counted(last).created, 'the residue and the members queued since the first import').toBeGreaterThanOrEqual(residue.length);
    expect(counted(last).refused).toBe(0);
    await shop.stop();
    // Once more: nothing is missing.
    const again = await shell(importBlock, server);
    expect(counted(again)).toMatchObject({ created: 0, refused: 0 });

    expect(shop.errors).toEqual([]);
    expect(old.errors).toEqual([]);
    const paidBefore = backlog.filter((_, i) => i % 10 === 7).map((order) => order.orderSn);
    const by = await checkEveryOrderOnce(db, [...backlog, ...residue, ...shop.placed], [...paidBefore, ...shop.paid]);
    // The window was real: each closed orders, and each came second to the other on some.
    expect(by.old).toBeGreaterThan(0);
    expect(by.punctual).toBeGreaterThan(0);
    expect(old.counts.leftAlone).toBeGreaterThan(0);
    expect(by.punctualSecond).toBeGreaterThan(0);
    console.log(
      `ZSET cutover: ${backlog.length + residue.length + shop.placed.length} orders; closed by the old consumer ${by.old}, by punctual ${by.punctual}; the old consumer found ${old.counts.leftAlone} closed or paid already, punctual ${by.punctualSecond} closed already; imports created ${counted(first).created} then ${counted(last).created}`,
    );
  }, 120_000);
});

describe('moving off an async_task poller (docs/migrating.md)', () => {
  const variants = [
    { name: 'params {"orderSn": …}, imported as close_order', byId: false },
    { name: 'params {"order_id": …}, imported as the close_order_by_id procedure', byId: true },
  ];
  it.each(variants)(
    '$name: every order closed exactly once through the cutover, none lost',
    async ({ byId }) => {
      const db = await createTestDatabase('cutover_async');
      const run: Run = { db, loops: [] };
      runs.push(run);
      await createShop(db);
      await createLedger(db);
      await db.execute(docBlock('sql', 'CREATE TABLE async_task').replace(/;\s*$/, ''));
      const env: Record<string, string> = { DATABASE_URL: db.url };
      let importBlock = docBlock('sh', 'punctual import --from-async-task', '--type close_order');
      if (byId) {
        for (const statement of statements(docBlock('sql', 'CREATE PROCEDURE shop.close_order_by_id'), db.name))
          await db.execute(statement);
        const block = docBlock('sh', 'PROCEDURES=close_order_by_id', '--type close_order_by_id').split('\n');
        env.PROCEDURES = /^PROCEDURES=(\S+)/.exec(block[0]!)![1]!.replace('=shop.', `=${db.name}.`);
        importBlock = block[1]!;
      }
      expect(importBlock.split('\n')).toHaveLength(1);
      const ours = (script: string) => script.replace('mysql://shop@127.0.0.1:3306/shop#', `${db.url}#`);
      const params = (order: Order, id: number) => JSON.stringify(byId ? { order_id: id } : { orderSn: order.orderSn });
      const insertRow = (order: Order, id: number, due: number, status = 0, conn: mysql.Pool | mysql.PoolConnection = db.pool) =>
        conn
          .query(
            "INSERT INTO async_task (type, params, execute_time, status, created_at, updated_at) VALUES ('close_order', ?, ?, ?, ?, ?)",
            [params(order, id), due, status, Math.floor(Date.now() / 1000), Math.floor(Date.now() / 1000)],
          )
          .then(() => undefined);

      const orders = makeOrders(600, 20, 'AT');
      const backlog = await placeBacklog(db, orders.slice(0, 150), (order, id, due) => insertRow(order, id, due));
      // A poller that died mid-run: rows claimed (status 1), never finished.
      const residue = await placeBacklog(db, orders.slice(150, 155), (order, id, due) => insertRow(order, id, due, 1));
      await db.execute('UPDATE orders SET status = ? WHERE order_sn IN (?)', ['unpaid', residue.map((order) => order.orderSn)]);

      // Its host's clock 300 ms ahead of punctual's, and rounds 700 ms apart rather than the usual second, so that
      // they fall at every point of the second during the test: some take a row before punctual, most after.
      const old = new AsyncTaskPoller(
        db.url,
        'async_task',
        (row) => (byId ? { id: Number(row.order_id) } : { orderSn: String(row.orderSn) }),
        { everyMs: 700, clockAheadMs: 300 },
      );
      await old.start();
      const shop = new Shop(db, orders.slice(155), async (way, order, id, due, conn) => {
        if (way === 'old') await insertRow(order, id, due, 0, conn);
        // Step 2: punctual's task in the order's own transaction, as Enqueue::inTransaction writes it.
        else
          await conn.query(
            "INSERT INTO punctual_tasks (task_key, type, payload, run_at) VALUES (?, 'close_order', JSON_OBJECT('orderSn', ?), FROM_UNIXTIME(?))",
            [`close_order:${order.orderSn}`, order.orderSn, due],
          );
      });
      shop.start();
      run.loops.push(shop, old);

      const server = await startServer({ env });
      run.server = server;
      shop.phase = 'mixed';
      await sleep(1000);
      const first = await shell(ours(importBlock), server);
      expect([first.code, first.stderr]).toEqual([0, '']);
      expect(counted(first).created).toBeGreaterThan(30);
      await sleep(1000);
      shop.phase = 'new';
      await sleep(3000);
      await old.stop();
      // Step 5, as written: the claimed rows back to pending, and the import again.
      await db.execute(docBlock('sql', 'WHERE status = 1').replace(/;\s*$/, ''));
      const last = await shell(ours(importBlock), server);
      expect([last.code, last.stderr]).toEqual([0, '']);
      expect(counted(last).created).toBeGreaterThanOrEqual(residue.length);
      await shop.stop();
      const again = await shell(ours(importBlock), server);
      expect(counted(again)).toMatchObject({ created: 0, refused: 0 });

      expect(shop.errors).toEqual([]);
      expect(old.errors).toEqual([]);
      const paidBefore = backlog.filter((_, i) => i % 10 === 7).map((order) => order.orderSn);
      const by = await checkEveryOrderOnce(db, [...backlog, ...residue, ...shop.placed], [...paidBefore, ...shop.paid]);
      expect(by.old).toBeGreaterThan(0);
      expect(by.punctual).toBeGreaterThan(0);
      expect(old.counts.leftAlone).toBeGreaterThan(0);
      expect(by.punctualSecond).toBeGreaterThan(0);
      console.log(
        `async_task cutover (${byId ? 'procedure' : 'close_order'}): ${backlog.length + residue.length + shop.placed.length} orders; closed by the old poller ${by.old}, by punctual ${by.punctual}; the old poller found ${old.counts.leftAlone} closed or paid already, punctual ${by.punctualSecond} closed already; imports created ${counted(first).created} then ${counted(last).created}`,
      );
    },
    120_000,
  );
});
