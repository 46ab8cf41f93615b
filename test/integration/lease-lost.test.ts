/**
 * An outside run whose lease was lost meanwhile (another process recovered the task and claimed it
 * again) is not this process's run to count: its completion or failure wrote no row, so neither
 * `punctual_task_runs_total` nor the recent-runs ring may count it, or the fleet counts one run twice.
 * The lease is taken over from inside the handler, as the other process would, between the claim
 * and the record.
 */
import { Type } from 'typebox';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { OutsideHandler } from '../../src/handlers/handler.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { parsePrometheus } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const OTHER = 'another-process:1:cafe';

let db: TestDatabase;
let service: TestService | undefined;
/** One entry per call of a handler: the effect happened once in this process. */
const calls: number[] = [];

/** Its lease is taken over by another process while it runs; then it succeeds, or throws. */
function stolen(type: string, outcome: 'succeeds' | 'throws'): OutsideHandler {
  return {
    type,
    effect: 'outside',
    payload: Type.Object({}, { additionalProperties: true }),
    timeoutMs: 10_000,
    async run({ task }) {
      calls.push(task.id);
      await db.execute("UPDATE punctual_tasks SET lease_owner = ?, lease_until = NOW(3) + INTERVAL 1 MINUTE WHERE id = ? AND status = 'running'", [
        OTHER,
        task.id,
      ]);
      if (outcome === 'throws') throw new Error('receiver broke');
    },
  };
}

const HANDLERS = [stolen('stolen_ok', 'succeeds'), stolen('stolen_fail', 'throws')];

async function runsCounted(type: string): Promise<number> {
  const text = (await service!.app.inject({ url: '/metrics' })).body;
  let total = 0;
  for (const [name, value] of parsePrometheus(text))
    if (name.startsWith('punctual_task_runs_total{') && name.includes(`type="${type}"`)) total += value;
  return total;
}

function ringCounts(): { done: number; retries: number; failures: number } {
  const snapshot = service!.recent.snapshot(Date.now());
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
  return { done: sum(snapshot.done), retries: sum(snapshot.retries), failures: sum(snapshot.failures) };
}

beforeAll(async () => {
  db = await createTestDatabase('lease_lost');
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  calls.length = 0;
});

afterAll(async () => {
  await db?.drop();
});

describe('an outside run whose lease was lost meanwhile', () => {
  for (const type of ['stolen_ok', 'stolen_fail']) {
    it(`${type}: is not counted as this process's run, and leaves the row to the new owner`, async () => {
      service = await startTestService(db, {}, { handlers: HANDLERS });
      const answer = await service.call('POST', '/tasks', { type, payload: {}, delayMs: 0 });
      expect(answer.status).toBe(201);
      const id = answer.body.id as number;
      await waitFor(
        async () => service!.logs.some((line) => line.taskId === id && String(line.msg).includes('lease was lost')),
        10_000,
        'the lost lease to be noticed',
      );
      expect(calls).toEqual([id]);
      expect(await runsCounted(type)).toBe(0);
      expect(ringCounts()).toEqual({ done: 0, retries: 0, failures: 0 });
      expect(service.logs.filter((line) => line.taskId === id && /^task (done|failed|will be retried)$/.test(String(line.msg)))).toEqual(
        [],
      );
      const [row] = await db.query<any[]>('SELECT status, lease_owner FROM punctual_tasks WHERE id = ?', [id]);
      expect(row).toEqual({ status: 'running', lease_owner: OTHER });
    });
  }
});
