/**
 * Stored procedures as task types (PROCEDURES), on a shop schema unlike the seeds'
 * (test/helpers/procedure-shop.ts). The close runs as CALL in the task's completion transaction:
 * through three kill -9s every order is closed once (its ledger row, its stock) and every rolled
 * back CALL shows in the non-transactional call log. A SIGNAL 45000 fails the task for good with
 * its message; a deadlock with a shop transaction is retried without using an attempt; a create
 * is checked against information_schema.PARAMETERS; a missing procedure or a missing EXECUTE
 * grant stops the start with one line.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, SERVER_URL, type TestDatabase } from '../helpers/db.js';
import { createProcedureShop, expectedStock, insertShopOrders, makeShopOrders, type ShopOrder } from '../helpers/procedure-shop.js';
import { startFailure } from '../helpers/start-failure.js';
import { createInBatches, killWhileRunning } from '../helpers/kill-loop.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';

let db: TestDatabase;
let shop: TestDatabase;
const orders = makeShopOrders(1200);

const proceduresEnv = () =>
  `close_unpaid=${shop.name}.close_unpaid_order,refuse=${shop.name}.refuse_order,start_sale=${shop.name}.start_flash_sale,local_touch=touch_counter`;

beforeAll(async () => {
  db = await createTestDatabase('procedures');
  // An unqualified procedure lives in DATABASE_URL's own schema.
  await db.execute('CREATE TABLE counter (n INT NOT NULL)');
  await db.execute('INSERT INTO counter VALUES (0)');
  await db.execute('CREATE PROCEDURE touch_counter(IN p_by SMALLINT) BEGIN UPDATE counter SET n = n + p_by; END');
  shop = await createProcedureShop(orders);
});

afterAll(async () => {
  await shop?.drop();
  await db?.drop();
});

const statusOf = async (id: number) => (await db.query<any[]>('SELECT status, attempts, last_error FROM punctual_tasks WHERE id = ?', [id]))[0];
const doneCount = async (ids: number[]) =>
  Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND id IN (?)", [ids]))[0].n);

describe('a procedure as a task type', () => {
  it('closes each order exactly once through kill -9 mid-run', async () => {
    const env = { DATABASE_URL: db.url, PROCEDURES: proceduresEnv(), CONCURRENCY: '4', BATCH_SIZE: '25' };
    let server: ServerProcess = await startServer({ env });
    const due = Date.now() + 8000;
    const ids = await createInBatches(
      server,
      orders.map((order, i) => ({
        type: 'close_unpaid',
        payload: { p_order_no: order.orderNo, p_reason: 'unpaid 30 min' },
        runAt: due + Math.floor((i * 6000) / orders.length),
      })),
    );
    expect(Date.now()).toBeLessThan(due);
    const ledger = async () => Number((await shop.query<any[]>('SELECT COUNT(*) AS n FROM close_ledger'))[0].n);
    const killed = await killWhileRunning(server, env, ledger, orders.length);
    server = killed.server;
    const { seenAtKill } = killed;
    try {
      await waitFor(async () => (await doneCount(ids)) === ids.length, 30_000, 'every close to run');
      expect(seenAtKill[2]).toBeLessThan(orders.length); // the last kill came before the end
      const [closes] = await shop.query<any[]>('SELECT COUNT(*) AS n, COUNT(DISTINCT order_no) AS orders FROM close_ledger');
      expect([Number(closes.n), Number(closes.orders)]).toEqual([orders.length, orders.length]);
      const [states] = await shop.query<any[]>('SELECT SUM(state = 9) AS closed, SUM(closed_at IS NOT NULL) AS stamped FROM trade_order');
      expect([Number(states.closed), Number(states.stamped)]).toEqual([orders.length, orders.length]);
      const stock = await shop.query<any[]>('SELECT id, stock FROM sku ORDER BY id');
      expect(new Map(stock.map((row) => [Number(row.id), Number(row.stock)]))).toEqual(expectedStock(orders));
      const [attempts] = await db.query<any[]>(
        'SELECT MIN(attempts) AS least, MAX(attempts) AS most, COUNT(last_error) AS errors FROM punctual_tasks WHERE id IN (?)',
        [ids],
      );
      expect([Number(attempts.least), Number(attempts.most), Number(attempts.errors)]).toEqual([1, 1, 0]);
      const [calls] = await shop.query<any[]>("SELECT COUNT(*) AS n FROM call_log WHERE proc = 'close'");
      console.log(
        `procedure close: ${orders.length} tasks, ${seenAtKill.length} kills -9 (ledger at each kill: ${seenAtKill.join(', ')}), ` +
          `${closes.n} ledger rows, ${calls.n} CALLs run to their end of which ${Number(calls.n) - orders.length} rolled back`,
      );
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 120_000);

  describe('with the server up', () => {
    let server: ServerProcess;

    beforeAll(async () => {
      server = await startServer({ env: { DATABASE_URL: db.url, PROCEDURES: proceduresEnv(), RETRY_BASE_MS: '100' } });
    });

    afterAll(async () => {
      await server?.stop();
    });

    it("fails for good on SIGNAL SQLSTATE '45000', with its message, and keeps none of the procedure's writes", async () => {
      const [order] = makeShopOrders(1, 'SIG');
      await insertShopOrders(shop, [order!]);
      const { status, body } = await server.request('POST', '/tasks', {
        type: 'refuse',
        payload: { p_order_no: order!.orderNo },
        delayMs: 0,
      });
      expect(status).toBe(201);
      const task = await waitFor(
        async () => {
          const row = await statusOf(body.id);
          return row.status === 'failed' ? row : undefined;
        },
        10_000,
        'the task to fail',
      );
      expect(Number(task.attempts)).toBe(1);
      expect(task.last_error).toContain(`order ${order!.orderNo} is held by finance`);
      // The INSERT before the SIGNAL was rolled back with it; the call log (Aria) saw one CALL.
      expect(await shop.query<any[]>('SELECT * FROM close_ledger WHERE order_no = ?', [order!.orderNo])).toEqual([]);
      expect(Number((await shop.query<any[]>('SELECT COUNT(*) AS n FROM call_log WHERE order_no = ?', [order!.orderNo]))[0].n)).toBe(1);
    });

    it('retries a deadlock with a shop transaction without using an attempt', async () => {
      const order: ShopOrder = { orderNo: 'DEADLOCK1', items: [{ sku: 5, qty: 3 }] };
      await insertShopOrders(shop, [order]);
      const [{ stock: before }] = await shop.query<any[]>('SELECT stock FROM sku WHERE id = 5');
      const conn = await mysql.createConnection({ uri: shop.url });
      try {
        // The shop's transaction holds the sku row and has written much: InnoDB picks the smaller one, punctual's, as the victim.
        await conn.query('CREATE TABLE heavy (n INT PRIMARY KEY) ENGINE=InnoDB'); // DDL commits: before the BEGIN
        await conn.query('BEGIN');
        await conn.query('INSERT INTO heavy (n) SELECT seq FROM seq_1_to_2000');
        await conn.query('SELECT stock FROM sku WHERE id = 5 FOR UPDATE');
        const { body } = await server.request('POST', '/tasks', {
          type: 'close_unpaid',
          payload: { p_order_no: order.orderNo, p_reason: 'deadlock' },
          delayMs: 0,
        });
        // The CALL has locked the order and waits for the sku row (in the procedure, its session's schema is the shop's).
        const waiting = async () => {
          const [row] = await shop.query<any[]>(
            "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE sku s JOIN%'",
            [shop.name],
          );
          return Number(row.n) > 0;
        };
        await waitFor(waiting, 10_000, 'the CALL to wait for the sku lock');
        // The cycle: a deadlock. The shop's statement goes through: punctual's transaction was the victim.
        await conn.query('SELECT state FROM trade_order WHERE order_no = ? FOR UPDATE', [order.orderNo]);
        await conn.query('ROLLBACK');
        await waitFor(async () => (await statusOf(body.id)).status === 'done', 10_000, 'the close to be done');
        const task = await statusOf(body.id);
        expect([Number(task.attempts), task.last_error]).toEqual([1, null]);
        // The CALL seen waiting held the order's lock; the shop got it at once, so that CALL's
        // transaction was rolled back; the order is closed once all the same: the CALL ran again,
        // and the victim's run never reached the call log's row at the procedure's end.
        expect(Number((await shop.query<any[]>('SELECT COUNT(*) AS n FROM call_log WHERE order_no = ?', [order.orderNo]))[0].n)).toBe(1);
        expect(Number((await shop.query<any[]>('SELECT COUNT(*) AS n FROM close_ledger WHERE order_no = ?', [order.orderNo]))[0].n)).toBe(
          1,
        );
        const [{ stock: after }] = await shop.query<any[]>('SELECT stock FROM sku WHERE id = 5');
        expect(Number(after)).toBe(Number(before) + 3);
      } finally {
        await conn.query('DROP TABLE IF EXISTS heavy').catch(() => undefined);
        await conn.end();
      }
    });

    it.each([
      ['a wrong type', { p_sale_id: 'seven', p_label: 'spring', p_starts: '2026-12-01 10:00:00' }, 'payload/p_sale_id'],
      ['a negative unsigned', { p_sale_id: -1, p_label: 'spring', p_starts: '2026-12-01 10:00:00' }, 'payload/p_sale_id'],
      ['a string too long', { p_sale_id: 7, p_label: 'springtime', p_starts: '2026-12-01 10:00:00' }, 'payload/p_label'],
      ['a malformed datetime', { p_sale_id: 7, p_label: 'spring', p_starts: 'tomorrow' }, 'payload/p_starts'],
      ['a missing field', { p_sale_id: 7, p_starts: '2026-12-01 10:00:00' }, 'p_label'],
      ['an unknown field', { p_sale_id: 7, p_label: 'spring', p_starts: '2026-12-01 10:00:00', p_discount: 5 }, 'p_discount'],
    ])('refuses a create with %s against PARAMETERS: 400 naming the field, nothing written', async (_, payload, field) => {
      const before = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
      const single = await server.request('POST', '/tasks', { type: 'start_sale', payload, delayMs: 0 });
      expect(single.status).toBe(400);
      expect(single.body.message).toContain(field);
      const batch = await server.request('POST', '/tasks/batch', { tasks: [{ type: 'start_sale', payload, delayMs: 0 }] });
      expect(batch.body.results[0].status).toBe(400);
      expect(batch.body.results[0].message).toContain(field);
      expect(await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks')).toEqual(before);
    });

    it('runs a good create, and an unqualified procedure from the schema of DATABASE_URL', async () => {
      const sale = await server.request('POST', '/tasks', {
        type: 'start_sale',
        payload: { p_sale_id: 7, p_label: 'spring', p_starts: '2026-12-01 10:00:00.250' },
        delayMs: 0,
      });
      const touch = await server.request('POST', '/tasks', { type: 'local_touch', payload: { p_by: 5 }, delayMs: 0 });
      expect([sale.status, touch.status]).toEqual([201, 201]);
      await waitFor(async () => (await doneCount([sale.body.id, touch.body.id])) === 2, 10_000, 'both to run');
      expect(await shop.query<any[]>('SELECT id, label FROM sale')).toEqual([{ id: 7, label: 'spring' }]);
      expect(Number((await db.query<any[]>('SELECT n FROM counter'))[0].n)).toBe(5);
      const types = (await server.request('GET', '/types')).body.types.map((type: { type: string }) => type.type);
      expect(types).toEqual(expect.arrayContaining(['close_unpaid', 'refuse', 'start_sale', 'local_touch']));
      const document = (await server.request('GET', '/openapi.json')).body;
      expect(document.components.schemas['CreateTask.start_sale'].properties.payload).toMatchObject({
        required: ['p_sale_id', 'p_label', 'p_starts'],
        additionalProperties: false,
        properties: { p_sale_id: { type: 'integer', minimum: 0, maximum: 4294967295 }, p_label: { type: 'string', maxLength: 8 } },
      });
    });
  });

  describe('at start', () => {
    it('stops with one line when a procedure does not exist', async () => {
      const { line } = await startFailure({ DATABASE_URL: db.url, PROCEDURES: `gone=${shop.name}.no_such_procedure` });
      expect(line).toBe(
        `punctual: cannot start: PROCEDURES: gone=${shop.name}.no_such_procedure: procedure ${shop.name}.no_such_procedure does not exist`,
      );
    });

    it('stops with one line without the EXECUTE grant, and starts once the procedure alone is granted', async () => {
      const user = `punctual_t_${randomBytes(4).toString('hex')}`;
      const password = randomBytes(12).toString('hex');
      const root = await mysql.createConnection({ uri: SERVER_URL });
      try {
        await root.query('CREATE USER ?@? IDENTIFIED BY ?', [user, '%', password]);
        await root.query(`GRANT ALL PRIVILEGES ON \`${db.name}\`.* TO ?@?`, [user, '%']);
        const url = new URL(db.url);
        url.username = user;
        url.password = password;
        const env = { DATABASE_URL: url.toString(), PROCEDURES: `close_unpaid=${shop.name}.close_unpaid_order` };
        const { line } = await startFailure(env);
        expect(line).toBe(
          `punctual: cannot start: PROCEDURES: close_unpaid=${shop.name}.close_unpaid_order: the database user may not EXECUTE procedure ${shop.name}.close_unpaid_order (or it does not exist): GRANT EXECUTE ON PROCEDURE ${shop.name}.close_unpaid_order TO the user of DATABASE_URL`,
        );
        expect(line).not.toContain(password);
        // The one grant the docs ask for: EXECUTE on the procedure, nothing on the shop's tables.
        await root.query(`GRANT EXECUTE ON PROCEDURE \`${shop.name}\`.\`close_unpaid_order\` TO ?@?`, [user, '%']);
        const server = await startServer({ env });
        try {
          const [order] = makeShopOrders(1, 'GRANT');
          await insertShopOrders(shop, [order!]);
          const { body } = await server.request('POST', '/tasks', {
            type: 'close_unpaid',
            payload: { p_order_no: order!.orderNo, p_reason: 'grant' },
            delayMs: 0,
          });
          await waitFor(async () => (await statusOf(body.id)).status === 'done', 10_000, 'the close to run as the granted user');
          expect(
            Number((await shop.query<any[]>('SELECT COUNT(*) AS n FROM close_ledger WHERE order_no = ?', [order!.orderNo]))[0].n),
          ).toBe(1);
        } finally {
          expect(await server.stop()).toBe(0);
        }
      } finally {
        await root.query('DROP USER IF EXISTS ?@?', [user, '%']).catch(() => undefined);
        await root.end();
      }
    });

    it('stops with one line on a parameter it cannot pass, or an OUT parameter', async () => {
      await shop.execute('CREATE PROCEDURE with_out(IN p_a INT, OUT p_b INT) BEGIN SET p_b = p_a; END');
      const { line } = await startFailure({ DATABASE_URL: db.url, PROCEDURES: `outy=${shop.name}.with_out` });
      expect(line).toBe(
        `punctual: cannot start: PROCEDURES: outy=${shop.name}.with_out: parameter p_b is OUT: a task's procedure takes IN parameters only`,
      );
    });
  });
});
