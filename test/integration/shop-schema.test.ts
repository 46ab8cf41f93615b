/**
 * A shop's own schema, against the real server (MariaDB), in-process:
 * - close_order on tables of the shop's naming through CLOSE_ORDER: integer status values, no
 *   stock update, or items and stock under other names; a paid order left alone; each close once
 *   (a ledger row per committed close, from a trigger on the shop's table).
 * - An error of the schema or the grants fails the task on its first attempt, naming what is
 *   missing: close_order on the write-ups' default against a shop `orders` without `items`, an
 *   unknown table, a procedure that does not exist, one called with the wrong number of
 *   arguments, access denied to a table. A lock wait timeout keeps its retries.
 */
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { SERVER_URL } from '../helpers/db.js';
import { serviceFixture } from '../helpers/fixture.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import type { TestService } from '../helpers/service.js';

const fixture = serviceFixture('shop_schema');
const users: string[] = [];

afterAll(async () => {
  const root = await mysql.createConnection({ uri: SERVER_URL });
  for (const user of users) await root.query('DROP USER IF EXISTS ?@?', [user, '%']);
  await root.end();
});

/** The task once it is no longer pending or running. */
async function settled(service: TestService, id: number): Promise<{ status: string; attempts: number; lastError: string | null }> {
  return waitFor(
    async () => {
      const { body } = await service.call('GET', `/tasks/${id}`);
      return body.status === 'pending' || body.status === 'running' ? undefined : body;
    },
    15_000,
    `task ${id} to settle`,
  );
}

async function create(service: TestService, body: Record<string, unknown>): Promise<number> {
  const answer = await service.call('POST', '/tasks', { delayMs: 0, ...body });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id as number;
}

describe("close_order on the shop's own tables (CLOSE_ORDER)", () => {
  it('closes an order whose status is an integer, stamps its own column, puts no stock back, and leaves a paid one', async () => {
    const { db } = fixture;
    await db.execute(`CREATE TABLE shop_order (sn VARCHAR(32) PRIMARY KEY, state TINYINT NOT NULL, closed_time DATETIME(3) NULL)`);
    await db.execute('CREATE TABLE shop_closes (id BIGINT AUTO_INCREMENT PRIMARY KEY, sn VARCHAR(32) NOT NULL)');
    await db.execute(`CREATE TRIGGER shop_order_closes AFTER UPDATE ON shop_order FOR EACH ROW
      INSERT INTO shop_closes (sn) SELECT NEW.sn FROM DUAL WHERE NEW.state = 9 AND OLD.state <> 9`);
    await db.execute("INSERT INTO shop_order (sn, state) VALUES ('A1', 0), ('A2', 1)");
    const mapping = { table: 'shop_order', key: 'sn', status: 'state', unpaid: 0, closed: 9, closedAt: 'closed_time', stock: null };
    const service = await fixture.start({ CLOSE_ORDER: JSON.stringify(mapping) });
    const unpaid = await create(service, { type: 'close_order', payload: { orderSn: 'A1' } });
    const paid = await create(service, { type: 'close_order', payload: { orderSn: 'A2' } });
    expect(await settled(service, unpaid)).toMatchObject({ status: 'done', attempts: 1 });
    expect(await settled(service, paid)).toMatchObject({ status: 'done', attempts: 1 });
    const rows = await db.query<any[]>('SELECT sn, state, closed_time IS NOT NULL AS stamped FROM shop_order ORDER BY sn');
    expect(rows.map((row) => [row.sn, row.state, Number(row.stamped)])).toEqual([
      ['A1', 9, 1],
      ['A2', 1, 0],
    ]);
    expect(await db.query<any[]>('SELECT sn FROM shop_closes')).toEqual([{ sn: 'A1' }]);
    expect((await service.call('GET', `/tasks/${paid}`)).body.lastResult).toBe('already 1');
  });

  it('puts the stock back from items and goods named its own way', async () => {
    const { db } = fixture;
    await db.execute('CREATE TABLE sku_stock (sku INT PRIMARY KEY, available INT NOT NULL)');
    await db.execute("CREATE TABLE sales_order (order_no VARCHAR(32) PRIMARY KEY, status VARCHAR(16) NOT NULL, `lines` JSON NOT NULL)");
    await db.execute('INSERT INTO sku_stock VALUES (7, 10), (8, 10)');
    await db.execute(`INSERT INTO sales_order VALUES ('B1', 'NEW', '[{"sku":7,"qty":2},{"sku":8,"qty":1},{"sku":7,"qty":1}]')`);
    const mapping = {
      table: 'sales_order',
      key: 'order_no',
      unpaid: 'NEW',
      closed: 'CANCELLED',
      closedAt: null,
      stock: { items: 'lines', itemGoods: 'sku', itemNum: 'qty', goods: 'sku_stock', goodsId: 'sku', column: 'available' },
    };
    const service = await fixture.start({ CLOSE_ORDER: JSON.stringify(mapping) });
    expect(await settled(service, await create(service, { type: 'close_order', payload: { orderSn: 'B1' } }))).toMatchObject({
      status: 'done',
    });
    expect(await db.query<any[]>('SELECT status FROM sales_order')).toEqual([{ status: 'CANCELLED' }]);
    expect(await db.query<any[]>('SELECT sku, available FROM sku_stock ORDER BY sku')).toEqual([
      { sku: 7, available: 13 },
      { sku: 8, available: 11 },
    ]);
  });

  it('fails a close whose write the shop\'s table refuses (a status too long for its column), not tried forever', async () => {
    const { db } = fixture;
    await db.execute("CREATE TABLE tiny_order (sn VARCHAR(16) PRIMARY KEY, st VARCHAR(4) NOT NULL)");
    await db.execute("INSERT INTO tiny_order VALUES ('D1', 'new')");
    const mapping = { table: 'tiny_order', key: 'sn', status: 'st', unpaid: 'new', closed: 'cancelled', closedAt: null, stock: null };
    const service = await fixture.start({ CLOSE_ORDER: JSON.stringify(mapping) });
    const id = await create(service, { type: 'close_order', payload: { orderSn: 'D1' }, maxAttempts: 2 });
    const task = await settled(service, id);
    expect(task).toMatchObject({ status: 'failed', attempts: 2 });
    expect(task.lastError).toMatch(/Data too long for column 'st'/);
    expect(await db.query<any[]>('SELECT st FROM tiny_order')).toEqual([{ st: 'new' }]);
  });

  it('refuses a CLOSE_ORDER that is not JSON, names a field it does not have, or a name MySQL would not take', async () => {
    for (const [value, said] of [
      ['orders', /must be a JSON object/],
      ['{"tabel":"orders"}', /has no field tabel/],
      ['{"table":"orders; DROP TABLE x"}', /table must be a MySQL name/],
      ['{"unpaid":{"x":1}}', /unpaid must be the status value as stored/],
    ] as const) {
      await expect(fixture.start({ CLOSE_ORDER: value }, { boot: false })).rejects.toThrow(said);
    }
  });
});

describe('an error of the schema or the grants', () => {
  it('fails on its first attempt, naming what is missing; one of each kind', async () => {
    const { db } = fixture;
    // The shop's own `orders`, without the write-ups' items column; close_order left at its default.
    await db.execute('CREATE TABLE orders (id INT PRIMARY KEY AUTO_INCREMENT, order_sn VARCHAR(32) UNIQUE, status VARCHAR(16))');
    await db.execute("INSERT INTO orders (order_sn, status) VALUES ('C1', 'unpaid')");
    await db.execute('CREATE PROCEDURE one_arg(IN n INT) BEGIN SELECT n; END');
    const user = `ss_${Math.random().toString(36).slice(2, 8)}`;
    users.push(user);
    await db.execute(`CREATE USER ?@? IDENTIFIED BY 'pw-shop-schema'`, [user, '%']);
    await db.execute(`GRANT ALL ON \`${db.name}\`.* TO ?@?`, [user, '%']);
    const url = new URL(db.url);
    url.username = user;
    url.password = 'pw-shop-schema';
    const sql = (type: string, statement: string) =>
      testHandler(type, async ({ conn }) => {
        await conn.query(statement);
      });
    const service = await fixture.start(
      { DATABASE_URL: url.toString(), RETRY_BASE_MS: '100' },
      {
        handlers: [
          sql('unknown_table', 'SELECT * FROM no_such_table'),
          sql('unknown_procedure', 'CALL no_such_procedure()'),
          sql('wrong_arguments', 'CALL one_arg(1, 2)'),
          sql('access_denied', 'SELECT * FROM mysql.user'),
        ],
      },
    );
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['close_order', { orderSn: 'C1' }, /Unknown column 'items'.*CLOSE_ORDER/],
      ['unknown_table', {}, /no_such_table.*doesn't exist/],
      ['unknown_procedure', {}, /no_such_procedure does not exist/i],
      ['wrong_arguments', {}, /one_arg.*expected 1, got 2/],
      ['access_denied', {}, /SELECT command denied/],
    ];
    const ids = await Promise.all(cases.map(([type, payload]) => create(service, { type, payload, maxAttempts: 4 })));
    for (const [i, [type, , named]] of cases.entries()) {
      const task = await settled(service, ids[i]!);
      expect(task, type).toMatchObject({ status: 'failed', attempts: 1 });
      expect(task.lastError, type).toMatch(named);
    }
    expect(await db.query<any[]>('SELECT status FROM orders')).toEqual([{ status: 'unpaid' }]);
  });

  it('but a lock wait timeout keeps its retries: the task runs once the lock is gone', async () => {
    const { db } = fixture;
    await db.execute('CREATE TABLE locked (id INT PRIMARY KEY, n INT NOT NULL)');
    await db.execute('INSERT INTO locked VALUES (1, 0)');
    const service = await fixture.start(
      { LOCK_WAIT_TIMEOUT_S: '1', RETRY_BASE_MS: '100' },
      {
        handlers: [
          testHandler('bump', async ({ conn }) => {
            await conn.query('UPDATE locked SET n = n + 1 WHERE id = 1');
          }),
        ],
      },
    );
    const lockWaits = async () => Number((await db.query<any[]>("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'"))[0].Value);
    const holder = await db.pool.getConnection();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT n FROM locked WHERE id = 1 FOR UPDATE');
      const before = await lockWaits();
      const id = await create(service, { type: 'bump', payload: {} });
      // The run waits for the lock and times out (1 s); a second wait is its retry, while the lock is held.
      await waitFor(async () => (await lockWaits()) >= before + 2, 15_000, 'the run to wait for the lock a second time');
      expect((await service.call('GET', `/tasks/${id}`)).body).toMatchObject({ status: 'pending' });
      await holder.query('COMMIT');
      expect(await settled(service, id)).toMatchObject({ status: 'done' });
      expect(await db.query<any[]>('SELECT n FROM locked')).toEqual([{ n: 1 }]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  });
});
