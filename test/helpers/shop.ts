/**
 * A shop's tables as the seeds describe them (orders, goods), with a trigger that logs every
 * close, so a test can tell "closed once" from "closed twice" even if the status check failed.
 */
import { createTestDatabase, type TestDatabase } from './db.js';

export interface Order {
  orderSn: string;
  items: { goods_id: number; num: number }[];
}

export async function createShop(db: TestDatabase, goodsCount = 20, initialStock = 1000): Promise<void> {
  await db.execute('CREATE TABLE goods (id BIGINT UNSIGNED PRIMARY KEY, stock INT NOT NULL)');
  await db.execute(`CREATE TABLE orders (
    id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
    order_sn VARCHAR(64) NOT NULL UNIQUE,
    status VARCHAR(16) NOT NULL DEFAULT 'unpaid',
    items JSON NOT NULL,
    closed_at DATETIME(3) NULL)`);
  await db.execute('CREATE TABLE close_log (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL)');
  await db.execute(`CREATE TRIGGER orders_close_log AFTER UPDATE ON orders FOR EACH ROW
    INSERT INTO close_log (order_sn) SELECT NEW.order_sn FROM DUAL WHERE NEW.status = 'closed' AND OLD.status <> 'closed'`);
  const rows = Array.from({ length: goodsCount }, (_, i) => [i + 1, initialStock]);
  await db.execute('INSERT INTO goods (id, stock) VALUES ?', [rows]);
}

/** Deterministic orders: 1-3 items each over goods 1..goodsCount. */
export function makeOrders(count: number, goodsCount = 20, prefix = 'SN'): Order[] {
  let seed = 12345;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  return Array.from({ length: count }, (_, i) => ({
    orderSn: `${prefix}${String(i + 1).padStart(6, '0')}`,
    items: Array.from({ length: 1 + next(3) }, () => ({ goods_id: 1 + next(goodsCount), num: 1 + next(5) })),
  }));
}

export async function insertOrders(db: TestDatabase, orders: Order[], status = 'unpaid'): Promise<void> {
  for (let i = 0; i < orders.length; i += 1000) {
    const rows = orders.slice(i, i + 1000).map((order) => [order.orderSn, status, JSON.stringify(order.items)]);
    await db.execute('INSERT INTO orders (order_sn, status, items) VALUES ?', [rows]);
  }
}

export interface ShopCheck {
  closed: number;
  closedTwice: number;
  stockMatches: boolean;
  expectedStock: Map<number, number>;
  actualStock: Map<number, number>;
}

/** Counts closes and checks that stock = initial + the items of every closed order, once. */
export async function checkShop(db: TestDatabase, orders: Order[], goodsCount = 20, initialStock = 1000): Promise<ShopCheck> {
  const closedRows = await db.query<({ order_sn: string } & import('mysql2').RowDataPacket)[]>(
    "SELECT order_sn FROM orders WHERE status = 'closed'",
  );
  const closed = new Set(closedRows.map((row) => row.order_sn));
  const twice = await db.query<({ n: number } & import('mysql2').RowDataPacket)[]>(
    'SELECT COUNT(*) AS n FROM (SELECT order_sn FROM close_log GROUP BY order_sn HAVING COUNT(*) > 1) AS t',
  );
  const expectedStock = new Map<number, number>();
  for (let id = 1; id <= goodsCount; id++) expectedStock.set(id, initialStock);
  for (const order of orders) {
    if (!closed.has(order.orderSn)) continue;
    for (const item of order.items) expectedStock.set(item.goods_id, (expectedStock.get(item.goods_id) ?? 0) + item.num);
  }
  const stockRows = await db.query<({ id: number; stock: number } & import('mysql2').RowDataPacket)[]>('SELECT id, stock FROM goods');
  const actualStock = new Map(stockRows.map((row) => [Number(row.id), row.stock]));
  const stockMatches = [...expectedStock].every(([id, stock]) => actualStock.get(id) === stock);
  return { closed: closed.size, closedTwice: Number(twice[0]?.n ?? 0), stockMatches, expectedStock, actualStock };
}

/** A test database with the shop's tables and `orders` in it, unpaid. */
export async function createShopDatabase(label: string, orders: Order[]): Promise<TestDatabase> {
  const db = await createTestDatabase(label);
  await createShop(db);
  await insertOrders(db, orders);
  return db;
}

export interface Lateness {
  id: number;
  runAt: number;
  /** orders.closed_at − tasks.run_at in ms; NaN while the order is not closed. */
  late: number;
}

/** How late each close_order task closed its order, from the database, in task id order. */
export async function closeLateness(db: TestDatabase, ids: number[]): Promise<Lateness[]> {
  const rows = await db.query<({ id: number; run_at: Date; late: string | null } & import('mysql2').RowDataPacket)[]>(
    `SELECT t.id, t.run_at, TIMESTAMPDIFF(MICROSECOND, t.run_at, o.closed_at) / 1000 AS late
       FROM tasks t JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))
      WHERE t.id IN (?) ORDER BY t.id`,
    [ids],
  );
  return rows.map((row) => ({ id: Number(row.id), runAt: row.run_at.getTime(), late: row.late === null ? Number.NaN : Number(row.late) }));
}

/** How many of `ids` have `status`. */
export async function countStatus(db: TestDatabase, status: string, ids: number[]): Promise<number> {
  const [row] = await db.query<({ n: number } & import('mysql2').RowDataPacket)[]>(
    'SELECT COUNT(*) AS n FROM tasks WHERE status = ? AND id IN (?)',
    [status, ids],
  );
  return Number(row?.n ?? 0);
}
