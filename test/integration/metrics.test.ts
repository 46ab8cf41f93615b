import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { outcomeHandlers } from '../helpers/handlers.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { createShopDatabase, makeOrders } from '../helpers/shop.js';

const orders = makeOrders(10, 20, 'ME');
let db: TestDatabase;
let service: TestService;

async function scrape(): Promise<{ text: string; values: Map<string, number> }> {
  const response = await service.app.inject({ url: '/metrics' });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toContain('text/plain');
  return { text: response.body, values: parsePrometheus(response.body) };
}

beforeAll(async () => {
  db = await createShopDatabase('metrics', orders);
  service = await startTestService(db, { RETRY_BASE_MS: '50' }, { handlers: outcomeHandlers() });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('GET /metrics', () => {
  it('counts runs by type and outcome, lateness, handler time, retries, timers, pool, backlog and lease recoveries', async () => {
    const create = (body: Record<string, unknown>) => service.call('POST', '/tasks', body).then((answer) => answer.body.id as number);
    const ids = [
      ...(await Promise.all(
        orders.slice(0, 5).map((order) => create({ type: 'close_order', payload: { orderSn: order.orderSn }, delayMs: 100 })),
      )),
      await create({ type: 'flaky', payload: {}, delayMs: 0 }),
      await create({ type: 'hopeless', payload: {}, delayMs: 0 }),
    ];
    await create({ type: 'close_order', payload: { orderSn: 'later' }, delayMs: 60_000 });
    await create({ type: 'close_order', payload: { orderSn: 'much-later' }, delayMs: 3_600_000 });
    await waitFor(async () => {
      const [row] = await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status IN ('done', 'failed')", [ids]);
      return Number(row.n) === ids.length;
    });
    // A lease left by a dead process, for the recovery counter.
    await db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, lease_owner, lease_until)
       VALUES ('flaky', '{}', UTC_TIMESTAMP(3) + INTERVAL 1 HOUR, 'running', 1, 'gone:1:x', UTC_TIMESTAMP(3) - INTERVAL 1 SECOND)`,
    );
    await service.scheduler.reconcile();

    const { text, values } = await scrape();
    expect(values.get('punctual_task_runs_total{type="close_order",outcome="done"}')).toBe(5);
    expect(values.get('punctual_task_runs_total{type="flaky",outcome="retry"}')).toBe(1);
    expect(values.get('punctual_task_runs_total{type="flaky",outcome="done"}')).toBe(1);
    expect(values.get('punctual_task_runs_total{type="hopeless",outcome="failed"}')).toBe(1);
    expect(values.get('punctual_task_retries_total{type="flaky"}')).toBe(1);
    expect(values.get('punctual_task_lateness_seconds_count{type="close_order"}')).toBe(5);
    expect(values.get('punctual_task_lateness_seconds_bucket{le="0.001",type="close_order"}')).toBeGreaterThanOrEqual(0);
    expect(values.get('punctual_task_lateness_seconds_bucket{le="60",type="close_order"}')).toBe(5);
    expect(values.get('punctual_handler_duration_seconds_count{type="close_order"}')).toBe(5);
    expect(values.get('punctual_lease_recoveries_total')).toBe(1);
    expect(values.get('punctual_armed_timers')).toBe(service.timers.size);
    expect(values.get('punctual_pending_tasks{type="close_order"}')).toBe(2);
    expect(values.get('punctual_pending_tasks{type="flaky"}')).toBe(1);
    expect(values.get('punctual_db_pool_open')).toBeGreaterThan(0);
    expect(values.has('punctual_db_pool_in_use')).toBe(true);
    expect(values.has('punctual_db_pool_waiting')).toBe(true);
    expect(values.has('punctual_refill_duration_seconds_count')).toBe(true);
    // Node's own, for the event-loop and memory panels.
    for (const name of [
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_heap_size_used_bytes',
      'process_resident_memory_bytes',
      'process_cpu_user_seconds_total',
    ]) {
      expect(values.has(name), name).toBe(true);
    }
    expect(text).toContain(
      '# HELP punctual_task_lateness_seconds How late a run started, of what punctual controls: run start − runAt − the time',
    );
    expect(text).toContain('# HELP punctual_task_wait_seconds ');
  });
});
