/**
 * A shop whose schema is unlike the seeds': `trade_order` with a `state TINYINT` (0 unpaid,
 * 1 paid, 9 closed), `order_item` rows, `sku` stock, and a `close_ledger` keyed by order that the
 * close writes in its own transaction. `call_log` is an Aria table, outside any transaction: it
 * counts every CALL that reached its end, the rolled-back ones too. Its procedures are what a MySQL shop would write.
 */
import { ensureDatabase } from '../../src/db/connection.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export const SKUS = 20;
export const INITIAL_STOCK = 1000;

const STATEMENTS = [
  'CREATE TABLE trade_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_no VARCHAR(32) NOT NULL UNIQUE, state TINYINT NOT NULL DEFAULT 0, closed_at DATETIME(3) NULL)',
  'CREATE TABLE order_item (id BIGINT AUTO_INCREMENT PRIMARY KEY, order_id BIGINT NOT NULL, sku_id INT NOT NULL, qty INT NOT NULL, KEY (order_id))',
  'CREATE TABLE sku (id INT PRIMARY KEY, stock INT NOT NULL)',
  'CREATE TABLE close_ledger (order_no VARCHAR(32) PRIMARY KEY, closed_at DATETIME(3) NOT NULL)',
  'CREATE TABLE call_log (id BIGINT AUTO_INCREMENT PRIMARY KEY, proc VARCHAR(32) NOT NULL, order_no VARCHAR(32) NOT NULL) ENGINE=Aria',
  'CREATE TABLE sale (id INT UNSIGNED PRIMARY KEY, label VARCHAR(8) NOT NULL, started_at DATETIME(3) NULL)',
  `CREATE PROCEDURE close_unpaid_order(IN p_order_no VARCHAR(32), IN p_reason VARCHAR(16))
   BEGIN
     DECLARE v_id BIGINT DEFAULT NULL;
     DECLARE v_state TINYINT DEFAULT NULL;
     DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_id = NULL;
     SELECT id, state INTO v_id, v_state FROM trade_order WHERE order_no = p_order_no FOR UPDATE;
     IF v_id IS NOT NULL AND v_state = 0 THEN
       UPDATE sku s JOIN (SELECT sku_id, SUM(qty) AS qty FROM order_item WHERE order_id = v_id GROUP BY sku_id) i ON i.sku_id = s.id
          SET s.stock = s.stock + i.qty;
       UPDATE trade_order SET state = 9, closed_at = NOW(3) WHERE id = v_id;
       INSERT INTO close_ledger (order_no, closed_at) VALUES (p_order_no, NOW(3));
     END IF;
     -- Last: InnoDB spares a transaction that wrote a non-transactional table when it picks a deadlock's victim.
     INSERT INTO call_log (proc, order_no) VALUES ('close', p_order_no);
   END`,
  `CREATE PROCEDURE refuse_order(IN p_order_no VARCHAR(32))
   BEGIN
     INSERT INTO call_log (proc, order_no) VALUES ('refuse', p_order_no);
     INSERT INTO close_ledger (order_no, closed_at) VALUES (p_order_no, NOW(3));
     SET @punctual_test_message = CONCAT('order ', p_order_no, ' is held by finance');
     SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = @punctual_test_message;
   END`,
  `CREATE PROCEDURE start_flash_sale(IN p_sale_id INT UNSIGNED, IN p_label VARCHAR(8), IN p_starts DATETIME(3))
   BEGIN
     INSERT INTO sale (id, label, started_at) VALUES (p_sale_id, p_label, p_starts);
   END`,
];

export interface ShopOrder {
  orderNo: string;
  items: { sku: number; qty: number }[];
}

export function makeShopOrders(count: number, prefix = 'TO'): ShopOrder[] {
  return Array.from({ length: count }, (_, i) => ({
    orderNo: `${prefix}${String(i).padStart(6, '0')}`,
    items: [
      { sku: (i % SKUS) + 1, qty: (i % 3) + 1 },
      { sku: ((i * 7) % SKUS) + 1, qty: 2 },
    ],
  }));
}

/** The shop's own database, with its tables and procedures, and `orders` unpaid. */
export async function createProcedureShop(orders: ShopOrder[]): Promise<TestDatabase> {
  const shop = await createTestDatabase('proc_shop', { create: false });
  await ensureDatabase(shop.url, shop.name);
  for (const statement of STATEMENTS) await shop.execute(statement);
  await shop.execute('INSERT INTO sku (id, stock) VALUES ?', [Array.from({ length: SKUS }, (_, i) => [i + 1, INITIAL_STOCK])]);
  await insertShopOrders(shop, orders);
  return shop;
}

export async function insertShopOrders(shop: TestDatabase, orders: ShopOrder[]): Promise<void> {
  for (let i = 0; i < orders.length; i += 500) {
    const chunk = orders.slice(i, i + 500);
    await shop.execute('INSERT INTO trade_order (order_no) VALUES ?', [chunk.map((order) => [order.orderNo])]);
    const rows = await shop.query<any[]>('SELECT id, order_no FROM trade_order WHERE order_no IN (?)', [
      chunk.map((order) => order.orderNo),
    ]);
    const idOf = new Map(rows.map((row) => [row.order_no as string, Number(row.id)]));
    await shop.execute('INSERT INTO order_item (order_id, sku_id, qty) VALUES ?', [
      chunk.flatMap((order) => order.items.map((item) => [idOf.get(order.orderNo), item.sku, item.qty])),
    ]);
  }
}

/** Each sku's stock once `closed` orders have given their items back. */
export function expectedStock(closed: ShopOrder[]): Map<number, number> {
  const stock = new Map(Array.from({ length: SKUS }, (_, i) => [i + 1, INITIAL_STOCK]));
  for (const order of closed) for (const item of order.items) stock.set(item.sku, stock.get(item.sku)! + item.qty);
  return stock;
}
