/**
 * close_order: closes an unpaid order and puts its items back in stock, in the transaction that
 * marks the task done (invariant 4: effect once). The order row is locked (FOR UPDATE) before its
 * status is read, so a payment cannot land in between; goods rows are updated in id order, so two
 * closes that share goods queue up instead of deadlocking. The tables are the shop's.
 * See docs/architecture.md#handlers.
 */
import type mysql from 'mysql2/promise';
import { Type } from 'typebox';
import type { Connection } from '../db/connection.js';
import { type DatabaseHandler, PermanentError } from './handler.js';
import { decodeJson } from '../util/json.js';

const payload = Type.Object(
  { orderSn: Type.String({ minLength: 1, maxLength: 64, description: 'orders.order_sn of the order to close' }) },
  { additionalProperties: false },
);

/** Stock to put back per goods id, summed, in ascending id order. */
export function stockReturns(items: unknown): [goodsId: number, num: number][] {
  if (!Array.isArray(items)) throw new PermanentError('orders.items is not a JSON array');
  const totals = new Map<number, number>();
  for (const item of items as { goods_id?: unknown; num?: unknown }[]) {
    const goodsId = Number(item?.goods_id);
    const num = Number(item?.num);
    if (!Number.isSafeInteger(goodsId) || goodsId <= 0 || !Number.isSafeInteger(num) || num < 0) {
      throw new PermanentError(`orders.items has a malformed item: ${JSON.stringify(item)}`);
    }
    totals.set(goodsId, (totals.get(goodsId) ?? 0) + num);
  }
  return [...totals.entries()].filter(([, num]) => num > 0).sort(([a], [b]) => a - b);
}

interface OrderRow extends mysql.RowDataPacket {
  id: number;
  order_sn: string;
  status: string;
  items: unknown;
}

/**
 * Closes the unpaid orders among `orderSns` and puts their items back in stock; answers what
 * happened to each order. Orders are locked in order_sn order, goods updated in id order: any
 * two closes take their locks in the same order, so they queue instead of deadlocking.
 * Three statements, however many orders.
 */
async function closeOrders(
  conn: Connection,
  orderSns: string[],
  defer: ((sql: string, values: unknown[]) => void) | undefined,
): Promise<Map<string, string>> {
  const wanted = [...new Set(orderSns)].sort();
  const [rows] = await conn.query<OrderRow[]>(
    'SELECT id, order_sn, status, items FROM orders WHERE order_sn IN (?) ORDER BY order_sn FOR UPDATE',
    [wanted],
  );
  const outcomes = new Map<string, string>(wanted.map((orderSn) => [orderSn, 'no such order']));
  const closing: number[] = [];
  const stock = new Map<number, number>();
  for (const row of rows) {
    // The status is read under the row lock: a payment cannot slip in between.
    if (row.status !== 'unpaid') {
      outcomes.set(row.order_sn, `already ${row.status}`);
      continue;
    }
    const items = decodeJson(row.items);
    for (const [goodsId, num] of stockReturns(items)) stock.set(goodsId, (stock.get(goodsId) ?? 0) + num);
    closing.push(row.id);
    outcomes.set(row.order_sn, 'closed');
  }
  if (closing.length === 0) return outcomes;
  // Nothing below is read back: with `defer` both writes travel with the completion and COMMIT.
  const write = async (sql: string, values: unknown[]) => {
    if (defer !== undefined) defer(sql, values);
    else await conn.query(sql, values);
  };
  await write("UPDATE orders SET status = 'closed', closed_at = NOW(3) WHERE id IN (?)", [closing]);
  if (stock.size > 0) {
    const returns = [...stock].sort(([a], [b]) => a - b);
    // One statement; ORDER BY id takes the row locks in id order.
    await write(
      `UPDATE goods SET stock = stock + CASE id ${returns.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE id IN (?) ORDER BY id`,
      [...returns.flat(), returns.map(([goodsId]) => goodsId)],
    );
  }
  return outcomes;
}

export const closeOrder: DatabaseHandler<typeof payload> = {
  type: 'close_order',
  effect: 'database',
  payload,
  timeoutMs: 30_000,
  // It locks the orders and defers both writes: locked ahead, committed at runAt.
  locksAhead: true,

  async run({ conn, defer, payload: { orderSn } }) {
    return (await closeOrders(conn, [orderSn], defer)).get(orderSn);
  },

  async runBatch({ conn, defer, tasks }) {
    const outcomes = await closeOrders(
      conn,
      tasks.map(({ payload: { orderSn } }) => orderSn),
      defer,
    );
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
