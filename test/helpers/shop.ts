/**
 * A shop's tables as the seeds describe them (orders, goods), and an effects ledger: a trigger on
 * `tasks` adds a row to `close_runs` every time a close_order task is marked done, whatever the
 * order's state. close_order re-reads the order under lock, so a second run leaves the shop's
 * tables unchanged; the ledger still gets its second row, so a double run is counted, never
 * silent. A run that rolls back takes its ledger row with it: the ledger counts committed runs.
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
  // One row per committed completion (its own key), so two completions of one task are two rows.
  await db.execute('CREATE TABLE close_runs (id BIGINT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT UNSIGNED NOT NULL, KEY (task_id))');
  await db.execute(`CREATE TRIGGER tasks_close_runs AFTER UPDATE ON punctual_tasks FOR EACH ROW
    INSERT INTO close_runs (task_id) SELECT NEW.id FROM DUAL WHERE NEW.status = 'done' AND NEW.type = 'close_order'`);
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
  /** close_order completions committed (ledger rows). */
  runs: number;
  /** close_order tasks completed more than once: must be 0. */
  ranTwice: number;
  stockMatches: boolean;
  expectedStock: Map<number, number>;
  actualStock: Map<number, number>;
}

/** Counts closes and runs, and checks that stock = initial + the items of every closed order, once. */
export async function checkShop(db: TestDatabase, orders: Order[], goodsCount = 20, initialStock = 1000): Promise<ShopCheck> {
  const closedRows = await db.query<({ order_sn: string } & import('mysql2').RowDataPacket)[]>(
    "SELECT order_sn FROM orders WHERE status = 'closed'",
  );
  const closed = new Set(closedRows.map((row) => row.order_sn));
  const [ledger] = await db.query<({ runs: number; twice: number } & import('mysql2').RowDataPacket)[]>(
    `SELECT (SELECT COUNT(*) FROM close_runs) AS runs,
            (SELECT COUNT(*) FROM (SELECT task_id FROM close_runs GROUP BY task_id HAVING COUNT(*) > 1) AS t) AS twice`,
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
  return {
    closed: closed.size,
    runs: Number(ledger?.runs ?? 0),
    ranTwice: Number(ledger?.twice ?? 0),
    stockMatches,
    expectedStock,
    actualStock,
  };
}

/** The ledger's committed runs of each of `ids` (0 for those that never completed). */
export async function runsOf(db: TestDatabase, ids: number[]): Promise<Map<number, number>> {
  const rows = await db.query<({ task_id: number; n: number } & import('mysql2').RowDataPacket)[]>(
    'SELECT task_id, COUNT(*) AS n FROM close_runs WHERE task_id IN (?) GROUP BY task_id',
    [ids],
  );
  const runs = new Map(ids.map((id) => [id, 0]));
  for (const row of rows) runs.set(Number(row.task_id), Number(row.n));
  return runs;
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
       FROM punctual_tasks t JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))
      WHERE t.id IN (?) ORDER BY t.id`,
    [ids],
  );
  return rows.map((row) => ({ id: Number(row.id), runAt: row.run_at.getTime(), late: row.late === null ? Number.NaN : Number(row.late) }));
}

/** How many of `ids` have `status`. */
export async function countStatus(db: TestDatabase, status: string, ids: number[]): Promise<number> {
  const [row] = await db.query<({ n: number } & import('mysql2').RowDataPacket)[]>(
    'SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = ? AND id IN (?)',
    [status, ids],
  );
  return Number(row?.n ?? 0);
}
