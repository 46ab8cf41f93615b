/**
 * Search: the console's one box (GET /tasks/search) and its keyset pages on 1,000,000 tasks: a
 * task by id, by key, by the last part of its key (`SN1500000` of `close_order:SN1500000`), the
 * tasks of a tag (1,000 of them) with its count, a miss; then the last page and a jump to a due
 * time. Each asked 30 times through HTTP, p50 and p99 of the answer.
 */
import { seedBacklog } from '../helpers/backlog.js';
import { type BenchDb, quantile, startServer } from './lib.js';

type Record = (scenario: string, metric: string, value: number, unit: string, target?: { text: string; ok: boolean }) => void;

const TASKS = Number(process.env.BENCH_SEARCH_TASKS ?? 1_000_000);
const ROUNDS = 30;
const DAY = 86_400_000;

export async function search(db: BenchDb, record: Record): Promise<void> {
  const S = 'B13';
  await db.reset();
  const seeded = performance.now();
  const start = Date.now() + DAY;
  await seedBacklog((sql) => db.exec(sql), {
    count: TASKS,
    start,
    spreadMs: 30 * DAY,
    types: ['close_order', 'coupon_expire', 'member_reset', 'sale_start', 'sale_end'],
    merchants: Math.max(1, Math.round(TASKS / 1000)),
    first: 1_000_000,
    batch: 5_000,
  });
  record(S, 'seed', (performance.now() - seeded) / 1000, 's');
  const server = await startServer(db);
  try {
    const [{ id }] = await db.rows('SELECT id FROM punctual_tasks WHERE task_key = ?', [
      `close_order:SN${1_000_000 + Math.floor(TASKS / 2)}`,
    ]);
    const middle = 1_000_000 + Math.floor(TASKS / 2);
    const asks: [string, string][] = [
      ['by id', `/tasks/search?q=${id}`],
      ['by key', `/tasks/search?q=close_order:SN${middle}`],
      ['by key part', `/tasks/search?q=SN${middle}`],
      ['by tag (1,000 tasks)', '/tasks/search?q=merchant:7&limit=50'],
      ['a miss', '/tasks/search?q=SN999999999'],
      ['last page of 1,000,000', '/tasks?status=pending&limit=50&last=true'],
      ['jump to a due time', `/tasks?status=pending&limit=50&at=${encodeURIComponent(new Date(start + 15 * DAY).toISOString())}`],
    ];
    for (const [name, path] of asks) {
      const times: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const began = performance.now();
        const response = await fetch(`${server.baseUrl}${path}`);
        const body = (await response.json()) as { tasks?: unknown[] };
        times.push(performance.now() - began);
        if (!response.ok || !Array.isArray(body.tasks)) throw new Error(`${path} answered ${response.status}`);
      }
      times.sort((a, b) => a - b);
      const search = path.startsWith('/tasks/search');
      record(S, `${name} p50`, quantile(times, 0.5), 'ms');
      record(S, `${name} p99`, quantile(times, 0.99), 'ms', search ? { text: '≤ 200 ms', ok: quantile(times, 0.99) <= 200 } : undefined);
    }
  } finally {
    await server.stop();
  }
}
