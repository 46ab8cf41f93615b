/**
 * close_order: closes an unpaid order and puts its items back in stock, in the transaction that
 * marks the task done (invariant 4: effect once). The order row is locked (FOR UPDATE) before its
 * status is read, so a payment cannot land in between; goods rows are updated in id order, so two
 * closes that share goods queue up instead of deadlocking. The tables are the shop's: their names,
 * columns and status values come from CLOSE_ORDER (CloseOrderMapping), the write-ups' schema by
 * default, and the stock update may be off. An error of the shop's schema or grants (an unknown
 * column) fails the task at once, naming what is missing and the setting that maps it.
 * See docs/handlers.md#close_order.
 */
import type mysql from 'mysql2/promise';
import { Type } from 'typebox';
import type { Connection } from '../db/connection.js';
import { schemaOrGrantError } from '../db/errors.js';
import { type DatabaseHandler, PermanentError } from './handler.js';
import { decodeJson } from '../util/json.js';

/**
 * Where close_order finds an order and its stock in the shop's database (CLOSE_ORDER). Names are
 * MySQL identifiers, a table optionally `schema.table`. `stock: null`: no stock is put back (the
 * items and goods are not read).
 */
export interface CloseOrderMapping {
  table: string;
  /** The order's number, unique: what the payload's orderSn names. */
  key: string;
  status: string;
  /** The status of an order still to close, and the one it gets. */
  unpaid: string | number;
  closed: string | number;
  /** Stamped NOW(3) when closed; null: not stamped. */
  closedAt: string | null;
  stock: null | {
    /** The order's JSON column of items, each with a goods id and a count. */
    items: string;
    itemGoods: string;
    itemNum: string;
    goods: string;
    goodsId: string;
    column: string;
  };
}

/** The write-ups' schema: orders(order_sn, status 'unpaid'|'closed', items JSON [{goods_id, num}], closed_at), goods(id, stock). */
export const DEFAULT_CLOSE_ORDER: CloseOrderMapping = {
  table: 'orders',
  key: 'order_sn',
  status: 'status',
  unpaid: 'unpaid',
  closed: 'closed',
  closedAt: 'closed_at',
  stock: { items: 'items', itemGoods: 'goods_id', itemNum: 'num', goods: 'goods', goodsId: 'id', column: 'stock' },
};

/** `name` or `schema.name` quoted as an identifier (the names are checked when the setting is read). */
export const quoted = (name: string) =>
  name
    .split('.')
    .map((part) => `\`${part}\``)
    .join('.');

/** The statements of a mapping, built once. */
export function closeOrderStatements(mapping: CloseOrderMapping) {
  const q = quoted;
  const stock = mapping.stock;
  return {
    lockOrders: `SELECT ${q(mapping.key)} AS order_sn, ${q(mapping.status)} AS status${stock === null ? '' : `, ${q(stock.items)} AS items`}
      FROM ${q(mapping.table)} WHERE ${q(mapping.key)} IN (?) ORDER BY ${q(mapping.key)} FOR UPDATE`,
    close: `UPDATE ${q(mapping.table)} SET ${q(mapping.status)} = ?${mapping.closedAt === null ? '' : `, ${q(mapping.closedAt)} = NOW(3)`}
      WHERE ${q(mapping.key)} IN (?)`,
    /** One statement per count of goods (WHEN ? THEN ? each). */
    putBack: (count: number) =>
      stock === null
        ? ''
        : `UPDATE ${q(stock.goods)} SET ${q(stock.column)} = ${q(stock.column)} + CASE ${q(stock.goodsId)} ${'WHEN ? THEN ? '.repeat(count)}END
      WHERE ${q(stock.goodsId)} IN (?) ORDER BY ${q(stock.goodsId)}`,
  };
}

const payload = Type.Object(
  { orderSn: Type.String({ minLength: 1, maxLength: 64, description: 'orders.order_sn of the order to close' }) },
  { additionalProperties: false },
);

/** Stock to put back per goods id, summed, in ascending id order. */
export function stockReturns(
  items: unknown,
  fields: { itemGoods: string; itemNum: string; items: string } = DEFAULT_CLOSE_ORDER.stock!,
): [goodsId: number, num: number][] {
  if (!Array.isArray(items)) throw new PermanentError(`the order's ${fields.items} is not a JSON array`);
  const totals = new Map<number, number>();
  for (const item of items as Record<string, unknown>[]) {
    const goodsId = Number(item?.[fields.itemGoods]);
    const num = Number(item?.[fields.itemNum]);
    if (!Number.isSafeInteger(goodsId) || goodsId <= 0 || !Number.isSafeInteger(num) || num < 0) {
      throw new PermanentError(`the order's ${fields.items} has a malformed item: ${JSON.stringify(item)}`);
    }
    totals.set(goodsId, (totals.get(goodsId) ?? 0) + num);
  }
  return [...totals.entries()].filter(([, num]) => num > 0).sort(([a], [b]) => a - b);
}

interface OrderRow extends mysql.RowDataPacket {
  order_sn: string;
  status: string | number;
  items?: unknown;
}

/**
 * Closes the unpaid orders among `orderSns` and puts their items back in stock; answers what
 * happened to each order. Orders are locked in key order, goods updated in id order: any two
 * closes take their locks in the same order, so they queue instead of deadlocking. Three
 * statements, however many orders.
 */
async function closeOrders(
  conn: Connection,
  mapping: CloseOrderMapping,
  sql: ReturnType<typeof closeOrderStatements>,
  orderSns: string[],
  defer: ((sql: string, values: unknown[]) => void) | undefined,
): Promise<Map<string, string>> {
  const wanted = [...new Set(orderSns)].sort();
  const [rows] = await conn.query<OrderRow[]>(sql.lockOrders, [wanted]);
  const outcomes = new Map<string, string>(wanted.map((orderSn) => [orderSn, 'no such order']));
  const closing: string[] = [];
  const stock = new Map<number, number>();
  for (const row of rows) {
    // The status is read under the row lock: a payment cannot slip in between.
    if (String(row.status) !== String(mapping.unpaid)) {
      outcomes.set(String(row.order_sn), `already ${String(row.status)}`);
      continue;
    }
    if (mapping.stock !== null) {
      for (const [goodsId, num] of stockReturns(decodeJson(row.items), mapping.stock)) stock.set(goodsId, (stock.get(goodsId) ?? 0) + num);
    }
    closing.push(String(row.order_sn));
    outcomes.set(String(row.order_sn), 'closed');
  }
  if (closing.length === 0) return outcomes;
  // Nothing below is read back: with `defer` both writes travel with the completion and COMMIT.
  const write = async (text: string, values: unknown[]) => {
    if (defer !== undefined) defer(text, values);
    else await conn.query(text, values);
  };
  await write(sql.close, [mapping.closed, closing]);
  if (stock.size > 0) {
    const returns = [...stock].sort(([a], [b]) => a - b);
    // One statement; ORDER BY the id takes the row locks in id order.
    await write(sql.putBack(returns.length), [...returns.flat(), returns.map(([goodsId]) => goodsId)]);
  }
  return outcomes;
}

/** An error of the shop's schema or grants, said with what maps it: no retry would fix it. */
function onTheShopsSchema(error: unknown): never {
  const problem = schemaOrGrantError(error);
  if (problem === undefined) throw error;
  throw new PermanentError(
    `close_order on the shop's tables: ${problem}; map its tables, columns and status values with CLOSE_ORDER (docs/handlers.md#close_order)`,
    { cause: error },
  );
}

/** close_order on the tables `mapping` names. */
export function closeOrder(mapping: CloseOrderMapping = DEFAULT_CLOSE_ORDER): DatabaseHandler<typeof payload> {
  const sql = closeOrderStatements(mapping);
  return {
    type: 'close_order',
    effect: 'database',
    payload,
    timeoutMs: 30_000,
    // It locks the orders and defers both writes: locked ahead, committed at runAt.
    locksAhead: true,

    async run({ conn, defer, payload: { orderSn } }) {
      return (await closeOrders(conn, mapping, sql, [orderSn], defer).catch(onTheShopsSchema)).get(orderSn);
    },

    async runBatch({ conn, defer, tasks }) {
      const outcomes = await closeOrders(
        conn,
        mapping,
        sql,
        tasks.map(({ payload: { orderSn } }) => orderSn),
        defer,
      ).catch(onTheShopsSchema);
      // Two tasks for one order in a batch: the first closes it, the next finds it closed.
      const seen = new Set<string>();
      return tasks.map(({ payload: { orderSn } }) => {
        const outcome = outcomes.get(orderSn);
        if (seen.has(orderSn) && outcome === 'closed') return 'already closed';
        seen.add(orderSn);
        return outcome;
      });
    },
  };
}
