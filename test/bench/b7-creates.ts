/**
 * B7 creates: tasks created 400 ms ahead through each of three SHARDING=on processes in turn (two
 * thirds land in shards another process owns), against the same creates through one process that
 * owns every shard (the baseline: a create through the owner), in the same run. Lateness is
 * orders.closed_at − tasks.run_at.
 */
import { type BenchDb, quantile, startServer, waitUntil } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const TASKS = 600;
const LEAD_MS = 400;
const GAP_MS = 10;

async function createdLateness(db: BenchDb, processes: number): Promise<number[]> {
  await db.reset();
  await db.seedOrders(TASKS);
  const servers = await Promise.all(Array.from({ length: processes }, () => startServer(db, { env: { SHARDING: 'on' } })));
  try {
    await waitUntil(
      async () => {
        const held = await Promise.all(
          servers.map(async (server) => ((await (await fetch(`${server.baseUrl}/readyz`)).json()) as { shards: number }).shards),
        );
        return held.reduce((a, b) => a + b, 0) === 256 && held.every((n) => n > 0);
      },
      30_000,
      'the shards to be shared out',
    );
    for (let i = 0; i < TASKS; i++) {
      const server = servers[i % servers.length]!;
      const response = await fetch(`${server.baseUrl}/tasks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'close_order', payload: { orderSn: `B${i + 1}` }, delayMs: LEAD_MS }),
      });
      if (response.status !== 201) throw new Error(`POST /tasks answered ${response.status}`);
      await new Promise((resolve) => setTimeout(resolve, GAP_MS));
    }
    await waitUntil(
      async () => (await db.count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done'")) === TASKS,
      60_000,
      'the creates to run',
    );
    return await db.closeLateness();
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
}

export async function shardedCreates(db: BenchDb, record: Record): Promise<void> {
  const S = 'B7 creates';
  const fleet = await createdLateness(db, 3);
  const owner = await createdLateness(db, 1);
  const p99 = quantile(fleet, 0.99);
  record(S, 'tasks run', fleet.length, 'tasks', { text: `= ${TASKS}`, ok: fleet.length === TASKS && (await db.stockAddsUp()) });
  record(S, '3 processes, through each in turn: lateness p50', quantile(fleet, 0.5), 'ms');
  record(S, '3 processes, through each in turn: lateness p99', p99, 'ms', { text: '≤ 50 ms', ok: p99 <= 50 });
  record(S, '1 process (the owner of all): lateness p99', quantile(owner, 0.99), 'ms');
  record(S, 'p99 through any ÷ through the owner', p99 / Math.max(1, quantile(owner, 0.99)), '×');
}
