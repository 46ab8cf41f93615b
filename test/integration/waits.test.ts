/**
 * One meaning per figure, against MariaDB: the time a run waited for its type's pause or limits is
 * its wait (waitedMs in the run history, punctual_task_wait_seconds with reason pause or limit, the
 * summary's and the charts' waited figures), never its lateness, which stays small; and the run
 * history, the /metrics histograms, GET /tasks/summary and GET /charts/recent agree on the same runs.
 */
import { describe, expect, it } from 'vitest';
import { testHandler } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { sleep } from '../helpers/service.js';
import { serviceFixture } from '../helpers/fixture.js';

const fixture = serviceFixture('waits');

/** Holds its run (and, with maxConcurrency 1, the next) for 400 ms. */
const SLOW_MS = 400;
const HANDLERS = [
  testHandler('w_paused', async () => undefined),
  testHandler('w_slow', async () => sleep(SLOW_MS)),
  testHandler('w_plain', async () => undefined),
];

/** A pause at least this long; a run it held must show it as its wait, not as lateness. */
const PAUSE_MS = 3000;
/** What a run's own lateness stays under on a loaded machine, while it waited seconds. */
const LATE_MARGIN_MS = 1000;

async function createMany(type: string, n: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const answer = await fixture.service!.call('POST', '/tasks', { type, payload: { i }, delayMs: 0 });
    expect(answer.status).toBe(201);
    ids.push(answer.body.id as number);
  }
  return ids;
}

function allDone(ids: number[]): Promise<void> {
  return waitFor(
    async () => {
      const [row] = await fixture.db.query<any>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [ids]);
      return Number(row!.n) === ids.length ? true : undefined;
    },
    30_000,
    `${ids.length} tasks to be done`,
  ).then(() => undefined);
}

/** The one run of each task (each ran once here). */
async function runsOf(ids: number[]): Promise<any[]> {
  const runs: any[] = [];
  for (const id of ids) {
    const answer = await fixture.service!.call('GET', `/tasks/${id}/runs`);
    expect(answer.status).toBe(200);
    expect(answer.body.runs).toHaveLength(1);
    runs.push(answer.body.runs[0]);
  }
  return runs;
}

/** A sample's value from the /metrics text: `name{labels}` exactly as exposed (labels in their order). */
async function metric(name: string, labels: string): Promise<number> {
  const text = (await fixture.service!.app.inject({ url: '/metrics' })).body;
  const line = String(text)
    .split('\n')
    .find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** The nearest-rank quantile (the charts' rule). */
function nearestRank(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

describe('waits for a pause or a limit', () => {
  it('a paused type: its runs show the pause as their wait (reason pause), and their lateness stays small', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    expect((await fixture.service.call('POST', '/types/w_paused/pause')).status).toBe(200);
    const pausedAt = Date.now();
    const ids = await createMany('w_paused', 3);
    // Held in the waiting room (no attempt used), then the pause lasts PAUSE_MS.
    await waitFor(
      async () => ((await metric('punctual_type_waiting', 'type="w_paused"')) === 3 ? true : undefined),
      10_000,
      'all 3 to wait',
    );
    await waitFor(async () => (Date.now() - pausedAt >= PAUSE_MS ? true : undefined), PAUSE_MS + 1000, 'the pause to last');
    const [held] = await fixture.db.query<any>(
      'SELECT COUNT(*) AS n, MAX(attempts) AS a FROM punctual_tasks WHERE id IN (?) AND status = ?',
      [ids, 'pending'],
    );
    expect([Number(held!.n), Number(held!.a)]).toEqual([3, 0]);
    expect((await fixture.service.call('POST', '/types/w_paused/resume')).status).toBe(200);
    await allDone(ids);
    const runs = await runsOf(ids);
    for (const run of runs) {
      expect(run.waitReason).toBe('pause');
      expect(run.waitedMs).toBeGreaterThanOrEqual(PAUSE_MS - 1000); // created within the first second of the pause
      expect(run.startLatenessMs).toBeLessThan(LATE_MARGIN_MS);
      expect(run.startLatenessMs).toBeGreaterThanOrEqual(0);
      // Start and finish apart: both leave the wait out.
      expect(Date.parse(run.startedAt) - Date.parse(run.dueAt) - run.waitedMs).toBe(run.startLatenessMs);
      expect(Date.parse(run.finishedAt) - Date.parse(run.dueAt) - run.waitedMs).toBe(run.finishLatenessMs);
    }
    // The metrics say the same: 3 waits for the pause, seconds long; lateness small.
    expect(await metric('punctual_task_wait_seconds_count', 'type="w_paused",reason="pause"')).toBe(3);
    expect(await metric('punctual_task_wait_seconds_sum', 'type="w_paused",reason="pause"')).toBeGreaterThanOrEqual(
      (3 * (PAUSE_MS - 1000)) / 1000,
    );
    expect(await metric('punctual_task_lateness_seconds_count', 'type="w_paused"')).toBe(3);
    expect(await metric('punctual_task_lateness_seconds_sum', 'type="w_paused"')).toBeLessThan((3 * LATE_MARGIN_MS) / 1000);
    // And the task's own lateness (the summary's source) leaves the wait out too.
    const stored = await fixture.db.query<any>('SELECT lateness_ms, waited_ms FROM punctual_tasks WHERE id IN (?)', [ids]);
    for (const row of stored) {
      expect(Number(row.lateness_ms)).toBeLessThan(LATE_MARGIN_MS);
      expect(Number(row.waited_ms)).toBeGreaterThanOrEqual(PAUSE_MS - 1000);
    }
  });

  it('a limit (maxConcurrency 1, slow runs): the runs that queued show their wait with reason limit, not lateness', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    expect((await fixture.service.call('PUT', '/types/w_slow/limits', { maxConcurrency: 1 })).status).toBe(200);
    const ids = await createMany('w_slow', 4);
    await allDone(ids);
    const runs = await runsOf(ids);
    // One at a time: the fourth started after three slow runs, and each that queued shows it.
    const waited = runs.filter((run) => run.waitedMs > 0);
    expect(waited.length).toBeGreaterThanOrEqual(3);
    for (const run of waited) expect(run.waitReason).toBe('limit');
    const total = runs.reduce((sum, run) => sum + run.waitedMs, 0);
    expect(total).toBeGreaterThanOrEqual(3 * SLOW_MS); // ≥ 1·+2·+3·SLOW_MS in theory: half of it at least
    for (const run of runs) expect(run.startLatenessMs).toBeLessThan(LATE_MARGIN_MS);
    expect(await metric('punctual_task_wait_seconds_count', 'type="w_slow",reason="limit"')).toBe(waited.length);
  });
});

describe('one meaning per figure', () => {
  it('the run history, the /metrics histograms, the summary and the charts agree on the same runs', async () => {
    fixture.service = await fixture.start({}, { handlers: HANDLERS });
    // The summary reads the latest done tasks of the table: only this test's.
    await fixture.db.execute('DELETE FROM punctual_tasks');
    expect((await fixture.service.call('PUT', '/types/w_slow/limits', { maxConcurrency: 1 })).status).toBe(200);
    const slow = await createMany('w_slow', 3);
    const plain = await createMany('w_plain', 20);
    await allDone([...slow, ...plain]);
    const runs = await runsOf([...slow, ...plain]);
    const late = runs.map((run) => run.startLatenessMs as number);
    const waits = runs.filter((run) => run.waitedMs > 0).map((run) => run.waitedMs as number);
    expect(waits.length).toBeGreaterThanOrEqual(1);

    // /metrics: the lateness histogram counts every run, its sum the same lateness (ms rounding
    // apart); the wait histogram counts the runs that waited, its sum their waits.
    let count = 0;
    let sum = 0;
    for (const type of ['w_slow', 'w_plain']) {
      count += await metric('punctual_task_lateness_seconds_count', `type="${type}"`);
      sum += await metric('punctual_task_lateness_seconds_sum', `type="${type}"`);
    }
    expect(count).toBe(runs.length);
    expect(Math.abs(sum * 1000 - late.reduce((a, b) => a + Math.max(0, b), 0))).toBeLessThanOrEqual(runs.length);
    expect(await metric('punctual_task_wait_seconds_count', 'type="w_slow",reason="limit"')).toBe(waits.length);
    const waitSum = await metric('punctual_task_wait_seconds_sum', 'type="w_slow",reason="limit"');
    expect(Math.abs(waitSum * 1000 - waits.reduce((a, b) => a + b, 0))).toBeLessThanOrEqual(waits.length);

    // The summary: the same runs' lateness and waits, the same quantile rule (index ⌊(n−1)q⌋).
    const summary = (await fixture.service.call('GET', '/tasks/summary')).body;
    const sorted = [...late].sort((a, b) => a - b);
    const sortedWaits = [...waits].sort((a, b) => a - b);
    expect(summary.latenessP99Ms).toBe(sorted[Math.floor((sorted.length - 1) * 0.99)]);
    expect(summary.latenessP50Ms).toBe(sorted[Math.floor((sorted.length - 1) * 0.5)]);
    expect(summary.waitedRuns).toBe(waits.length);
    expect(summary.waitedP99Ms).toBe(sortedWaits[Math.floor((sortedWaits.length - 1) * 0.99)]);

    // The charts: per 10 s slot, as many runs and waits, and p99s within the ring's bucket precision (5 % high at most).
    const recent = (await fixture.service.call('GET', '/charts/recent')).body;
    const start = Date.parse(recent.start);
    const total = (recent.done as number[]).reduce((a, b) => a + b, 0);
    expect(total).toBe(runs.length);
    expect((recent.waited as number[]).reduce((a, b) => a + b, 0)).toBe(waits.length);
    const bySlot = new Map<number, any[]>();
    for (const run of runs) {
      const slot = Math.floor((Date.parse(run.startedAt) - start) / recent.slotMs);
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), run]);
    }
    const near = (shown: number, truth: number) => {
      expect(shown).toBeGreaterThanOrEqual(Math.max(0, truth) - 0.1);
      expect(shown).toBeLessThanOrEqual(Math.max(0, truth) * 1.05 + 0.1);
    };
    for (const [slot, inSlot] of bySlot) {
      expect(recent.done[slot]).toBe(inSlot.length);
      near(
        recent.latenessP99Ms[slot],
        nearestRank(
          inSlot.map((run) => run.startLatenessMs),
          0.99,
        ),
      );
      const slotWaits = inSlot.filter((run) => run.waitedMs > 0).map((run) => run.waitedMs);
      expect(recent.waited[slot]).toBe(slotWaits.length);
      if (slotWaits.length > 0) near(recent.waitedP99Ms[slot], nearestRank(slotWaits, 0.99));
      else expect(recent.waitedP99Ms[slot]).toBeNull();
    }
  });
});
