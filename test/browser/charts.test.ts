/**
 * The dashboard's charts in a real browser (Debian's chromium driven by playwright-core): tasks
 * created at known minutes and hours show in the upcoming-load charts at those buckets, by type,
 * and runs that were done, retried and failed show in the recent-runs charts. The test reads the
 * data uPlot drew (window.punctualCharts), not just that a canvas exists. A screenshot is kept in
 * test-artifacts/charts.png (the README's copy is docs/charts.png).
 */
import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'charts-token-0123456789';
const MINUTE = 60_000;
const HOUR = 3_600_000;
let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;

const report = testHandler('report', async () => undefined);
const reminder = testHandler('reminder', async () => undefined);
/** Fails on its first attempt, then succeeds: one retry. */
const flaky = testHandler('flaky', async ({ task }) => {
  if (task.attempts === 0) throw new Error('first try fails');
});
const broken = testHandler('broken', async () => {
  throw new Error('always fails');
});

beforeAll(async () => {
  db = await createTestDatabase('charts');
  service = await startTestService(
    db,
    { API_TOKEN: TOKEN, PORT: '0', RETRY_BASE_MS: '50' },
    { boot: false, handlers: [report, reminder, flaky, broken] },
  );
  baseUrl = await service.start();
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

interface Drawn {
  labels: string[];
  data: (number | null)[][];
}

/** What uPlot holds for a chart now: its series' labels and data arrays. */
async function drawn(page: Page, name: string): Promise<Drawn | undefined> {
  return page.evaluate((chart) => {
    const entry = (globalThis as any).punctualCharts?.[chart];
    if (entry === undefined) return undefined;
    return { labels: entry.plot.series.map((s: any) => s.label), data: entry.plot.data.map((a: any) => Array.from(a)) };
  }, name);
}

/** A stacked chart's own count per type at the bucket starting at `bucketMs`. */
function countsAt(chart: Drawn, bucketMs: number): Record<string, number> {
  const index = chart.data[0]!.indexOf(bucketMs / 1000);
  if (index < 0) return {};
  // Series are drawn tallest first, each the running total up to its type.
  const out: Record<string, number> = {};
  for (let s = 1; s < chart.labels.length; s++) {
    const here = Number(chart.data[s]![index] ?? 0);
    const below = s + 1 < chart.labels.length ? Number(chart.data[s + 1]![index] ?? 0) : 0;
    if (here - below > 0) out[chart.labels[s]!] = here - below;
  }
  return out;
}

describe('the dashboard charts', () => {
  it('show the upcoming load at the minutes and hours tasks are due, and the runs of the last hour', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const create = async (body: object) => {
      const answer = await service.call('POST', '/tasks', body, auth);
      expect(answer.status).toBe(201);
      return answer.body.id as number;
    };
    // Due at known instants: 3 reports and 1 reminder in one minute, 2 reminders in a later one,
    // 4 reports two days ahead. Seconds into a minute, so a bucket edge is never in question.
    const base = Math.floor(Date.now() / MINUTE) * MINUTE;
    const soon = base + 12 * MINUTE + 30_000;
    const later = base + 40 * MINUTE + 15_000;
    const days = Math.floor((Date.now() + 2 * 24 * HOUR) / HOUR) * HOUR + 20 * MINUTE;
    for (let i = 0; i < 3; i++) await create({ type: 'report', payload: { i }, runAt: soon + i * 1000 });
    await create({ type: 'reminder', payload: {}, runAt: soon });
    for (let i = 0; i < 2; i++) await create({ type: 'reminder', payload: { i }, runAt: later });
    for (let i = 0; i < 4; i++) await create({ type: 'report', payload: { far: i }, runAt: days + i * MINUTE });
    // Runs now: 5 done, one retried then done, one failed for good after a retry.
    for (let i = 0; i < 5; i++) await create({ type: 'report', payload: { now: i }, delayMs: 0 });
    await create({ type: 'flaky', payload: {}, delayMs: 0 });
    const failing = await create({ type: 'broken', payload: {}, delayMs: 0, maxAttempts: 2 });
    await waitFor(async () => {
      const [row] = await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status IN ('done', 'failed')");
      return Number(row.n) === 7;
    });
    const [broke] = await db.query<any[]>('SELECT status FROM punctual_tasks WHERE id = ?', [failing]);
    expect(broke.status).toBe('failed');

    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    // Before the token is given the data answers 401, as it should; anything else is a fault.
    page.on(
      'response',
      (response) => response.status() >= 400 && response.status() !== 401 && errors.push(`${response.status()} ${response.url()}`),
    );
    await page.goto(`${baseUrl}/`);
    await page.locator('#token-form').waitFor({ state: 'visible' });
    await page.fill('#token', TOKEN);
    await page.click('#token-form button');

    // The minute chart: the live refresh brings the counts in (a count may be a few seconds old).
    const minutes = await waitFor(
      async () => {
        const chart = await drawn(page, 'minutes');
        return chart !== undefined && countsAt(chart, Math.floor(later / MINUTE) * MINUTE).reminder === 2 ? chart : undefined;
      },
      20_000,
      'the minute chart to show the tasks',
    ).catch(async (error: Error) => {
      const inPage = await page.evaluate(() => (globalThis as any).punctualCharts?.errors ?? []);
      throw new Error(`${error.message}; errors in the page: ${[...errors, ...inPage].join('; ') || 'none'}`);
    });
    expect(countsAt(minutes, Math.floor(soon / MINUTE) * MINUTE)).toEqual({ report: 3, reminder: 1 });
    expect(countsAt(minutes, Math.floor(later / MINUTE) * MINUTE)).toEqual({ reminder: 2 });
    expect(minutes.data[0]).toHaveLength(60);
    // Every other minute is empty: the total over the hour is the 6 tasks.
    const top = minutes.data[1]!.reduce((sum: number, n) => sum + Number(n ?? 0), 0);
    expect(top).toBe(6);

    const hours = (await drawn(page, 'hours'))!;
    expect(hours.data[0]).toHaveLength(7 * 24);
    expect(countsAt(hours, Math.floor(days / HOUR) * HOUR)).toEqual({ report: 4 });
    expect(countsAt(hours, Math.floor(soon / HOUR) * HOUR).report).toBeGreaterThanOrEqual(3);
    expect(hours.data[1]!.reduce((sum: number, n) => sum + Number(n ?? 0), 0)).toBe(10);

    // Recent runs: per second per 10 s slot, so the slots add up to the runs / 10.
    const runs = (await drawn(page, 'runs'))!;
    expect(runs.labels).toEqual(['started', 'done /s', 'retries /s', 'failures /s']);
    const sum = (series: (number | null)[]) => Math.round(series.reduce((a: number, n) => a + Number(n ?? 0), 0) * 10);
    expect(sum(runs.data[1]!)).toBe(6); // 5 reports and the flaky one's second try
    expect(sum(runs.data[2]!)).toBe(2); // flaky's first try and broken's first
    expect(sum(runs.data[3]!)).toBe(1); // broken's second, for good
    const lateness = (await drawn(page, 'lateness'))!;
    expect(lateness.labels).toEqual(['started', 'p50 ms', 'p99 ms', 'waited p99 ms']);
    const p99 = lateness.data[2]!.filter((v): v is number => v !== null);
    expect(p99.length).toBeGreaterThan(0);
    expect(p99.every((v) => v >= 0 && v < 60_000)).toBe(true);
    expect(await page.locator('#recent-note').textContent()).toContain('1 failure');
    expect(await page.locator('#upcoming-note').textContent()).toContain('6 tasks in the next hour, 10 tasks in the next 7 days');
    // The charts are canvases uPlot drew, one per chart.
    expect(await page.locator('.chart canvas').count()).toBe(4);

    expect(errors).toEqual([]);
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/charts.png', fullPage: false });
    await page.close();
  });
});
