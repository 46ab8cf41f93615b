/**
 * The dashboard's task types panel in a real browser (Debian's chromium driven by playwright-core):
 * every token sees each type with its state and limits; only an admin token gets the Pause and
 * Resume buttons (the API refuses them to the others), and they pause and resume the type.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'types-admin-token-0123456789';
const READ = 'types-read-token-0123456789';
const WRITE = 'types-write-token-0123456789';
let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;

beforeAll(async () => {
  db = await createTestDatabase('types_panel');
  service = await startTestService(
    db,
    { API_TOKENS_ADMIN: ADMIN, API_TOKENS_READ: READ, API_TOKENS_WRITE: WRITE, PORT: '0' },
    { boot: false, handlers: [testHandler('partner_webhook', async () => undefined)] },
  );
  baseUrl = await service.start();
  browser = await launchBrowser();
  const set = await service.call(
    'PUT',
    '/types/partner_webhook/limits',
    { maxConcurrency: 2, ratePerSecond: 5, groupBy: 'merchant' },
    { authorization: `Bearer ${ADMIN}` },
  );
  expect(set.status).toBe(200);
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

/** The console's two layouts: a phone's width and a desktop's. */
const LAYOUTS = [
  { name: 'narrow', width: 390, height: 844 },
  { name: 'wide', width: 1440, height: 900 },
] as const;

async function open(token: string, viewport: { width: number; height: number }): Promise<Page> {
  const page = await (await browser.newContext({ viewport })).newPage();
  await page.goto(`${baseUrl}/console/types`);
  await page.locator('#token-form').waitFor({ state: 'visible' });
  await page.fill('#token', token);
  await page.click('#token-form button');
  await page.locator('#task-types tbody tr[data-type="partner_webhook"]').waitFor();
  return page;
}

const row = (page: Page) => page.locator('#task-types tbody tr[data-type="partner_webhook"]');

async function paused(): Promise<boolean> {
  const rows = await db.query<any[]>("SELECT paused FROM punctual_type_controls WHERE type = 'partner_webhook'");
  return Number(rows[0]?.paused) === 1;
}

describe.each(LAYOUTS)('the task types panel, $name ($width px)', ({ width, height }) => {
  it('shows each type and its limits to a read or write token, without the admin buttons', async () => {
    for (const token of [READ, WRITE]) {
      const page = await open(token, { width, height });
      expect(await row(page).locator('td').nth(1).textContent()).toBe('running');
      expect(await row(page).locator('td').nth(2).textContent()).toBe('2 at once, 5/s, per merchant');
      expect(await page.locator('#task-types tr[data-type="close_order"]').count()).toBe(1);
      expect(await page.locator('#task-types button').count()).toBe(0);
      await page.context().close();
    }
  });

  it('gives an admin token Pause and Resume, which pause and resume the type after a confirmation', async () => {
    const page = await open(ADMIN, { width, height });
    // Going back from the confirmation changes nothing.
    await row(page).locator('button', { hasText: 'Pause' }).click();
    await page.locator('#confirm-text', { hasText: 'on every process of the fleet' }).waitFor();
    await page.locator('#confirm-no').click();
    expect(await paused()).toBe(false);
    await row(page).locator('button', { hasText: 'Pause' }).click();
    await page.locator('#confirm-yes').click();
    await row(page).locator('button', { hasText: 'Resume' }).waitFor();
    expect(await row(page).locator('td').nth(1).textContent()).toBe('paused');
    await waitFor(paused, 5000, 'the pause to be stored');
    await row(page).locator('button', { hasText: 'Resume' }).click();
    await page.locator('#confirm-yes').click();
    await row(page).locator('button', { hasText: 'Pause' }).waitFor();
    await waitFor(async () => !(await paused()), 5000, 'the resume to be stored');
    await page.context().close();
  });
});
