/**
 * The run history against MariaDB: every attempt on record with its outcome (a run rolled back
 * leaves nothing), a failed or lost one in a row of its own, the successful one in its task's row
 * (done_by names its process), for database and outside handlers, a lease that ran out, and GET
 * /tasks/:id/runs; a task's lastError describes its latest run; the runs go with their task under
 * retention. Pull workers' runs too: ack, nack, a permanent nack and a lease that ran out, named by
 * a digest of the lease token, never the token. Rows a release before 0.2 wrote for successful
 * runs are read once, beside the runs of this one.
 */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import type { OutsideHandler } from '../../src/handlers/handler.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { leaseHolder } from '../../src/lifecycle/history.js';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('run_history');

/** Fails its first two attempts, then succeeds. */
const thirdTime = testHandler('third_time', async ({ task }) => {
  if (task.attempts < 2) throw new Error(`try ${task.attempts + 1} broke`);
});
const hopeless = testHandler('hopeless_run', async () => {
  throw new PermanentError('never');
});

/** An outside handler that answers 503 on its first call, then 200. */
const hook: OutsideHandler = {
  type: 'hook_run',
  effect: 'outside',
  payload: Type.Object({}, { additionalProperties: true }),
  timeoutMs: 10_000,
  async run({ attempt, answered }) {
    if (attempt === 1) {
      answered({ httpStatus: 503, responseBytes: 7 });
      throw new Error('receiver answered 503');
    }
    answered({ httpStatus: 200, responseBytes: 2 });
  },
};

const HANDLERS = [thirdTime, hopeless, hook];

async function create(body: Record<string, unknown>): Promise<number> {
  const answer = await fixture.service!.call('POST', '/tasks', body);
  expect(answer.status).toBe(201);
  return answer.body.id as number;
}

function settled(id: number) {
  return waitFor(
    async () => {
      const task = (await fixture.service!.call('GET', `/tasks/${id}`)).body;
      return ['done', 'failed'].includes(task.status) ? task : undefined;
    },
    20_000,
    `task ${id} to settle`,
  );
}

/** The rows of `id`'s runs in the table, and who its task's row says ran it to done. */
async function recordsOf(id: number): Promise<{ rows: number; doneBy: string | null }> {
  const [count] = await fixture.db.query<any>('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE task_id = ?', [id]);
  const [task] = await fixture.db.query<any>('SELECT done_by FROM punctual_tasks WHERE id = ?', [id]);
  return { rows: Number(count!.n), doneBy: task?.done_by ?? null };
}

async function runsOf(id: number, query = ''): Promise<any[]> {
  const answer = await fixture.service!.call('GET', `/tasks/${id}/runs${query}`);
  expect(answer.status).toBe(200);
  return answer.body.runs;
}

describe('run history', () => {
  it('keeps every attempt of a database handler, newest first, and lastError follows the latest run', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    const id = await create({ type: 'third_time', payload: {}, delayMs: 0, maxAttempts: 5 });
    const task = await settled(id);
    expect(task.status).toBe('done');
    expect(task.attempts).toBe(3);
    // The latest run succeeded: the earlier failure is history, not the task's error.
    expect(task.lastError).toBeNull();
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome])).toEqual([
      [3, 'done'],
      [2, 'retry'],
      [1, 'retry'],
    ]);
    expect(runs[2].error).toBe('try 1 broke');
    expect(runs[1].error).toBe('try 2 broke');
    expect(runs[0].error).toBeNull();
    for (const run of runs) {
      expect(run.taskId).toBe(id);
      expect(run.process).toBe(fixture.service.owner);
      expect(run.startLatenessMs).toBeGreaterThanOrEqual(0);
      expect(Date.parse(run.startedAt) - Date.parse(run.dueAt)).toBe(run.startLatenessMs);
      expect(Date.parse(run.finishedAt) - Date.parse(run.dueAt)).toBe(run.finishLatenessMs);
      expect(run.finishLatenessMs).toBeGreaterThanOrEqual(run.startLatenessMs);
    }
    // Each retry was due later than the run before it (the backoff moved runAt).
    expect(Date.parse(runs[0].dueAt)).toBeGreaterThan(Date.parse(runs[2].dueAt));
    // Counted as effects: a row per failed attempt in the table; the successful one is the task's row.
    expect(await recordsOf(id)).toEqual({ rows: 2, doneBy: fixture.service.owner });
    expect(runs.map((run) => run.id === null)).toEqual([true, false, false]);
    expect(runs[0].durationMs).toBe(Date.parse(runs[0].finishedAt) - Date.parse(runs[0].startedAt));
  });

  it('reads the rows a release before 0.2 wrote for successful runs once, beside the runs of this one', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    // As 0.1.0 left a task that failed once, then succeeded: a row per run, no done_by.
    const inserted = await fixture.db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, finished_at, lateness_ms, waited_ms)
       VALUES ('third_time', '{}', UTC_TIMESTAMP(3) - INTERVAL 10 SECOND, 'done', 2, UTC_TIMESTAMP(3) - INTERVAL 5 SECOND, 3, 0)`,
    );
    const old = Number(inserted.insertId);
    await fixture.db.execute(
      `INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, process)
       VALUES (?, 1, 'retry', UTC_TIMESTAMP(3) - INTERVAL 20 SECOND, UTC_TIMESTAMP(3) - INTERVAL 20 SECOND, UTC_TIMESTAMP(3) - INTERVAL 20 SECOND, 1, 1, 'old:1:a'),
              (?, 2, 'done', UTC_TIMESTAMP(3) - INTERVAL 10 SECOND, UTC_TIMESTAMP(3) - INTERVAL 10 SECOND, UTC_TIMESTAMP(3) - INTERVAL 5 SECOND, 3, 5000, 'old:1:a')`,
      [old, old],
    );
    const before = (await fixture.service.call('GET', '/runs/last-hour')).body;
    const id = await create({ type: 'third_time', payload: {}, delayMs: 0, maxAttempts: 5 });
    await settled(id);
    expect((await runsOf(old)).map((run) => [run.attempt, run.outcome, run.process])).toEqual([
      [2, 'done', 'old:1:a'],
      [1, 'retry', 'old:1:a'],
    ]);
    expect((await runsOf(id)).map((run) => [run.attempt, run.outcome])).toEqual([
      [3, 'done'],
      [2, 'retry'],
      [1, 'retry'],
    ]);
    // The hour's figures count each run once, whichever record holds it (the answer is shared for 5 s).
    const after = await waitFor(
      async () => {
        const figures = (await fixture.service!.call('GET', '/runs/last-hour')).body;
        return figures.until !== before.until ? figures : undefined;
      },
      10_000,
      'a new count of the last hour',
    );
    const [table] = await fixture.db.query<any>(
      "SELECT SUM(outcome = 'done') AS done, SUM(outcome = 'retry') AS retries FROM punctual_task_runs WHERE finished_at >= UTC_TIMESTAMP(3) - INTERVAL 1 HOUR",
    );
    const [rows] = await fixture.db.query<any>(
      "SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND done_by IS NOT NULL AND finished_at >= UTC_TIMESTAMP(3) - INTERVAL 1 HOUR",
    );
    expect(after.done).toBe(Number(table.done) + Number(rows.n));
    expect(after.retries).toBe(Number(table.retries));
    expect(after.done - before.done).toBe(1);
    expect(after.retries - before.retries).toBe(2);
  });

  it('records a permanent failure as failed, once', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    const id = await create({ type: 'hopeless_run', payload: {}, delayMs: 0 });
    const task = await settled(id);
    expect(task.status).toBe('failed');
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome, run.error])).toEqual([[1, 'failed', 'never']]);
  });

  it("keeps an outside handler's runs with their HTTP status and duration", async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    const id = await create({ type: 'hook_run', payload: {}, delayMs: 0 });
    const task = await settled(id);
    expect(task.status).toBe('done');
    expect(task.lastError).toBeNull();
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome, run.httpStatus])).toEqual([
      [2, 'done', 200],
      [1, 'retry', 503],
    ]);
    expect(runs[1].error).toBe('receiver answered 503');
  });

  it('records a lease that ran out as a lost run', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    // As a process that died mid-run leaves it: running, its lease over, the attempt counted.
    await fixture.db.execute(
      `INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, lease_owner, lease_until, lateness_ms)
       VALUES ('hook_run', '{}', UTC_TIMESTAMP(3) - INTERVAL 10 SECOND, 'running', 1, 'gone:1:dead', UTC_TIMESTAMP(3) - INTERVAL 1 SECOND, 40)`,
    );
    const [row] = await fixture.db.query<any>("SELECT MAX(id) AS id FROM punctual_tasks WHERE lease_owner = 'gone:1:dead'");
    const id = Number(row!.id);
    await fixture.service.lifecycle.recoverExpiredLeases();
    const task = await settled(id);
    expect(task.status).toBe('done');
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome])).toEqual([
      [2, 'done'],
      [1, 'lost'],
    ]);
    expect(runs[1].process).toBe('gone:1:dead');
    expect(runs[1].startLatenessMs).toBe(40);
  });

  it('pages with nextCursor, and answers 404 for an unknown task and 400 for a bad cursor', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    const id = await create({ type: 'third_time', payload: {}, delayMs: 0, maxAttempts: 5 });
    await settled(id);
    const first = await fixture.service.call('GET', `/tasks/${id}/runs?limit=2`);
    expect(first.body.runs.map((run: any) => run.attempt)).toEqual([3, 2]);
    expect(first.body.nextCursor).not.toBeNull();
    const second = await fixture.service.call('GET', `/tasks/${id}/runs?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.runs.map((run: any) => run.attempt)).toEqual([1]);
    expect(second.body.nextCursor).toBeNull();
    expect((await fixture.service.call('GET', '/tasks/999999999/runs')).status).toBe(404);
    expect((await fixture.service.call('GET', `/tasks/${id}/runs?cursor=abc`)).status).toBe(400);
    expect((await fixture.service.call('GET', `/tasks/${id}/runs?limit=0`)).status).toBe(400);
    // One a page: the successful run (it has no row id) and then each row, each once.
    const seen: number[] = [];
    let cursor: string | null = '';
    while (cursor !== null) {
      const page: any = await fixture.service.call('GET', `/tasks/${id}/runs?limit=1${cursor === '' ? '' : `&cursor=${cursor}`}`);
      seen.push(...page.body.runs.map((run: any) => run.attempt));
      cursor = page.body.nextCursor;
    }
    expect(seen).toEqual([3, 2, 1]);
  });

  it('writes nothing with RUN_HISTORY=off', async () => {
    fixture.service = await fixture.start({ RUN_HISTORY: 'off' }, { handlers: HANDLERS });
    const id = await create({ type: 'hopeless_run', payload: {}, delayMs: 0 });
    const done = await create({ type: 'third_time', payload: {}, delayMs: 0, maxAttempts: 5 });
    await settled(id);
    expect((await settled(done)).status).toBe('done');
    expect(await runsOf(id)).toEqual([]);
    expect(await runsOf(done)).toEqual([]);
    expect(await recordsOf(done)).toEqual({ rows: 0, doneBy: null });
  });

  it("deletes a task's runs with it under retention", async () => {
    fixture.service = await fixture.start({ RETENTION_MS: '1000' }, { handlers: HANDLERS });
    const id = await create({ type: 'hopeless_run', payload: {}, delayMs: 0 });
    await settled(id);
    await fixture.db.execute("UPDATE punctual_tasks SET status = 'done', finished_at = UTC_TIMESTAMP(3) - INTERVAL 1 HOUR WHERE id = ?", [
      id,
    ]);
    await fixture.service.retention.sweep();
    const [count] = await fixture.db.query<any>('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE task_id = ?', [id]);
    expect(Number(count!.n)).toBe(0);
  });
});

describe('run history of pull workers', () => {
  const PULLED = { WORKER_TYPES: 'pulled' };

  /** Leases the one due task (asked again while a claim holds its row for a moment: SKIP LOCKED). */
  function lease(leaseMs = 30_000): Promise<{ id: number; leaseToken: string; attempt: number }> {
    return waitFor(
      async () => {
        const answer = await fixture.service!.call('POST', '/workers/lease', { types: ['pulled'], max: 1, leaseMs });
        expect(answer.status).toBe(200);
        return answer.body.tasks[0];
      },
      10_000,
      'a task to lease',
    );
  }

  it("records an ack as done, under the lease's digest, once", async () => {
    fixture.service = await fixture.start(PULLED);
    const id = await create({ type: 'pulled', payload: {}, delayMs: 0 });
    const leased = await lease();
    expect(leased.id).toBe(id);
    expect((await fixture.service.call('POST', `/tasks/${id}/ack`, { leaseToken: leased.leaseToken })).status).toBe(200);
    // A second ack is stale: a 409, and no second row.
    expect((await fixture.service.call('POST', `/tasks/${id}/ack`, { leaseToken: leased.leaseToken })).status).toBe(409);
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome, run.error])).toEqual([[1, 'done', null]]);
    expect(runs[0].process).toBe(leaseHolder(leased.leaseToken));
    expect(runs[0].process).toMatch(/^pull:[0-9a-f]{12}$/);
    expect(JSON.stringify(runs)).not.toContain(leased.leaseToken);
    expect(runs[0].startLatenessMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(runs[0].startedAt) - Date.parse(runs[0].dueAt)).toBe(runs[0].startLatenessMs);
    expect(Date.parse(runs[0].finishedAt)).toBeGreaterThanOrEqual(Date.parse(runs[0].startedAt));
    expect(await recordsOf(id)).toEqual({ rows: 0, doneBy: leaseHolder(leased.leaseToken) });
    expect((await fixture.service.call('GET', `/tasks/${id}`)).body.lastError).toBeNull();
  });

  it('records a nack as retry, and the next run as its own; lastError follows the latest run', async () => {
    fixture.service = await fixture.start(PULLED);
    const id = await create({ type: 'pulled', payload: {}, delayMs: 0, maxAttempts: 3 });
    const first = await lease();
    const nacked = await fixture.service.call('POST', `/tasks/${id}/nack`, {
      leaseToken: first.leaseToken,
      error: 'printer jammed',
      retryAt: new Date().toISOString(),
    });
    expect(nacked.status).toBe(200);
    expect(nacked.body.lastError).toBe('printer jammed');
    const second = await lease();
    expect(second.attempt).toBe(2);
    expect((await fixture.service.call('POST', `/tasks/${id}/ack`, { leaseToken: second.leaseToken })).status).toBe(200);
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome, run.error])).toEqual([
      [2, 'done', null],
      [1, 'retry', 'printer jammed'],
    ]);
    expect(runs[1].process).toBe(leaseHolder(first.leaseToken));
    expect(runs[0].process).toBe(leaseHolder(second.leaseToken));
    expect((await fixture.service.call('GET', `/tasks/${id}`)).body.lastError).toBeNull();
    expect(await recordsOf(id)).toEqual({ rows: 1, doneBy: leaseHolder(second.leaseToken) });
  });

  it('records a permanent nack as failed, once', async () => {
    fixture.service = await fixture.start(PULLED);
    const id = await create({ type: 'pulled', payload: {}, delayMs: 0, maxAttempts: 3 });
    const leased = await lease();
    const nacked = await fixture.service.call('POST', `/tasks/${id}/nack`, {
      leaseToken: leased.leaseToken,
      error: 'no such sku',
      permanent: true,
    });
    expect(nacked.status).toBe(200);
    expect(nacked.body.status).toBe('failed');
    expect(nacked.body.lastError).toBe('no such sku');
    // A stale nack after it writes nothing.
    expect((await fixture.service.call('POST', `/tasks/${id}/nack`, { leaseToken: leased.leaseToken, error: 'again' })).status).toBe(409);
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome, run.error])).toEqual([[1, 'failed', 'no such sku']]);
    expect(await recordsOf(id)).toEqual({ rows: 1, doneBy: null });
  });

  it('records a lease that ran out as lost, before the next worker runs it; lastError says so meanwhile', async () => {
    fixture.service = await fixture.start(PULLED);
    const id = await create({ type: 'pulled', payload: {}, delayMs: 0, maxAttempts: 3 });
    const first = await lease(1000);
    // The worker died: no ack. The next lease request recovers the expired lease and gets the task.
    const second = await waitFor(
      async () => {
        const answer = await fixture.service!.call('POST', '/workers/lease', { types: ['pulled'], max: 1, leaseMs: 30_000 });
        return answer.body.tasks?.[0];
      },
      20_000,
      'the expired lease to be leased again',
    );
    expect(second.id).toBe(id);
    expect(second.attempt).toBe(2);
    const meanwhile = (await fixture.service.call('GET', `/tasks/${id}`)).body;
    expect(meanwhile.lastError).toMatch(/^lease expired/);
    expect((await fixture.service.call('POST', `/tasks/${id}/ack`, { leaseToken: second.leaseToken })).status).toBe(200);
    const runs = await runsOf(id);
    expect(runs.map((run) => [run.attempt, run.outcome])).toEqual([
      [2, 'done'],
      [1, 'lost'],
    ]);
    expect(runs[1].process).toBe(leaseHolder(first.leaseToken));
    expect(runs[1].error).toMatch(/^lease expired/);
    expect(JSON.stringify(runs)).not.toContain(first.leaseToken);
    expect((await fixture.service.call('GET', `/tasks/${id}`)).body.lastError).toBeNull();
    expect(await recordsOf(id)).toEqual({ rows: 1, doneBy: leaseHolder(second.leaseToken) });
  });

  it('writes no pull run with RUN_HISTORY=off', async () => {
    fixture.service = await fixture.start({ ...PULLED, RUN_HISTORY: 'off' });
    const id = await create({ type: 'pulled', payload: {}, delayMs: 0 });
    const leased = await lease();
    expect((await fixture.service.call('POST', `/tasks/${id}/ack`, { leaseToken: leased.leaseToken })).status).toBe(200);
    expect(await recordsOf(id)).toEqual({ rows: 0, doneBy: null });
    expect(await runsOf(id)).toEqual([]);
  });
});

describe('the cost of a run row', () => {
  /** Every text the service's pool sends from now on (one call of a connection's query: one round trip). */
  function countTexts(): string[] {
    const sent: string[] = [];
    const database = fixture.service!.database;
    const own = database.withConnection.bind(database);
    database.withConnection = (fn, deadlineMs) =>
      own((conn) => {
        const query = conn.query.bind(conn);
        (conn as unknown as { query: unknown }).query = (options: string | { sql: string }, ...rest: unknown[]) => {
          sent.push(typeof options === 'string' ? options : options.sql);
          return (query as (...args: unknown[]) => unknown)(options, ...rest);
        };
        return fn(conn);
      }, deadlineMs);
    return sent;
  }

  /** The texts that carry a run row: each must end in the COMMIT it travels with. */
  const runTexts = (sent: string[]) => sent.filter((text) => text.includes('INSERT INTO punctual_task_runs'));

  it('travels with COMMIT on a single MariaDB server: a batch, an ack and a nack send no round trip of their own for it', async () => {
    fixture.service = await fixture.start({ WORKER_TYPES: 'pulled' }, { handlers: HANDLERS });
    expect(await fixture.service.database.pipelines()).toBe(true);
    const sent = countTexts();
    const ran = await create({ type: 'third_time', payload: {}, delayMs: 0, maxAttempts: 5 });
    await settled(ran);
    const acked = await create({ type: 'pulled', payload: {}, delayMs: 0 });
    const nacked = await create({ type: 'pulled', payload: {}, delayMs: 0 });
    // A row a claim holds for a moment is skipped by a lease (SKIP LOCKED): ask until both are leased.
    const leased = new Map<number, string>();
    await waitFor(
      async () => {
        for (const task of (await fixture.service!.call('POST', '/workers/lease', { types: ['pulled'], max: 2 })).body.tasks) {
          leased.set(task.id, task.leaseToken);
        }
        return leased.size === 2 ? true : undefined;
      },
      10_000,
      'both pulled tasks to be leased',
    );
    expect([...leased.keys()].sort()).toEqual([acked, nacked].sort());
    expect((await fixture.service.call('POST', `/tasks/${acked}/ack`, { leaseToken: leased.get(acked) })).status).toBe(200);
    const nack = await fixture.service.call('POST', `/tasks/${nacked}/nack`, {
      leaseToken: leased.get(nacked),
      error: 'x',
      permanent: true,
    });
    expect(nack.status).toBe(200);
    // Three runs of the batch path (two failed), one ack, one nack: three rows, each in a COMMIT's
    // text; the two successful runs are on record in their tasks' rows, with no row.
    expect(await runsOf(ran)).toHaveLength(3);
    const carried = runTexts(sent);
    expect(carried).toHaveLength(3);
    for (const text of carried) expect(text).toMatch(/;\nCOMMIT$/);
    // The successful runs' record (done_by, with the status) travels with COMMIT as well.
    const done = sent.filter((text) => /done_by = /.test(text));
    expect(done.length).toBeGreaterThanOrEqual(2);
    for (const text of done) expect(text).toMatch(/;\nCOMMIT$/);
  });
});
