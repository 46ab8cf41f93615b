/**
 * B11: the sale's wall. 50,000 `close_order` of priority -5 and 500 of priority 5 due at the same
 * second, inserted straight into the table (the 500 last, so the boot load arms them last) and
 * loaded by the server's boot. Measured: how late the 500 high ones close their orders, and
 * when the wall has drained. The baseline is the same wall in the same run with the 500 at the
 * wall's own priority: where they finish without priority (the order the timers fire in).
 */
import { type BenchDb, quantile, startServer, utcSql, waitUntil } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const S = 'B11';
const LOW = 50_000;
const HIGH = 500;
const TARGET_MS = 300;

/** One wall; answers the high ones' lateness (sorted) and the wall's drain time. */
async function wall(db: BenchDb, highPriority: number): Promise<{ high: number[]; drainedMs: number }> {
  await db.reset();
  await db.seedOrders(LOW + HIGH);
  const at = Math.ceil((Date.now() + 12_000) / 1000) * 1000;
  await db.seedTasks(LOW + HIGH, utcSql(at));
  await db.exec(`UPDATE punctual_tasks SET priority = IF(id > ${LOW}, ${highPriority}, -5)`);
  const server = await startServer(db);
  try {
    await waitUntil(
      async () => Date.now() >= at && (await db.count("SELECT COUNT(*) AS n FROM orders WHERE status = 'closed'")) === LOW + HIGH,
      300_000,
      'B11 wall to drain',
      250,
    );
    const rows = await db.rows<{ late: string; high: number }>(
      `SELECT TIMESTAMPDIFF(MICROSECOND, t.run_at, o.closed_at) / 1000 AS late, t.id > ${LOW} AS high
         FROM punctual_tasks t JOIN orders o ON o.order_sn = JSON_UNQUOTE(JSON_EXTRACT(t.payload, '$.orderSn'))`,
    );
    const high = rows.filter((row) => Number(row.high) === 1).map((row) => Number(row.late));
    const all = rows.map((row) => Number(row.late));
    return { high: high.sort((a, b) => a - b), drainedMs: Math.max(...all) };
  } finally {
    await server.stop();
  }
}

export async function priorityWall(db: BenchDb, record: Record): Promise<void> {
  const prioritised = await wall(db, 5);
  const baseline = await wall(db, -5);
  const max = prioritised.high.at(-1)!;
  record(S, 'high ones closed', prioritised.high.length, 'orders', { text: `= ${HIGH}`, ok: prioritised.high.length === HIGH });
  record(S, 'high lateness p50', quantile(prioritised.high, 0.5), 'ms');
  record(S, 'high lateness max', max, 'ms', { text: `≤ ${TARGET_MS} ms`, ok: max <= TARGET_MS });
  record(S, 'wall drained in', prioritised.drainedMs / 1000, 's');
  record(S, 'without priority: high lateness p50', quantile(baseline.high, 0.5), 'ms');
  record(S, 'without priority: high lateness max', baseline.high.at(-1)!, 'ms');
  record(S, 'high max ÷ high max without priority', max / baseline.high.at(-1)!, '×');
}
