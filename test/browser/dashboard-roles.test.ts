/**
 * The dashboard with a read token, in a real browser (Debian's chromium driven by playwright-core):
 * it shows the queue as usual and has no Cancel or Retry button, since the API would refuse them;
 * with a write token the buttons are back, but not the bulk changes (admin).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const FULL = 'dashboard-full-token-0123456789';
const READ = 'dashboard-read-token-0123456789';
const WRITE = 'dashboard-write-token-0123456789';
let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;

beforeAll(async () => {
  db = await createTestDatabase('dashboard_roles');
  service = await startTestService(
    db,
    { API_TOKEN: FULL, API_TOKENS_READ: READ, API_TOKENS_WRITE: WRITE, PORT: '0' },
    { boot: false, handlers: [testHandler('always_fails', async () => Promise.reject(new Error('partner answered 503')))] },
  );
  baseUrl = await service.start();
  browser = await launchBrowser();
  const auth = { authorization: `Bearer ${FULL}` };
  for (let i = 0; i < 3; i++)
    await service.call('POST', '/tasks', { type: 'always_fails', payload: { i }, delayMs: 600_000 + i * 1000 }, auth);
  const failing = (await service.call('POST', '/tasks', { type: 'always_fails', payload: {}, delayMs: 0, maxAttempts: 1 }, auth)).body.id;
  await waitFor(async () => (await db.query<any[]>('SELECT status FROM punctual_tasks WHERE id = ?', [failing]))[0].status === 'failed');
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

/** The dashboard in a fresh browser context (its own localStorage), signed in with `token`. */
async function open(token: string): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(`${baseUrl}/console/tasks/pending`);
  await page.locator('#token-form').waitFor({ state: 'visible' });
  await page.fill('#token', token);
  await page.click('#token-form button');
  await page.locator('#tasks tbody tr[data-id]').nth(2).waitFor();
  return page;
}

/** The Failed view, with its rows in. */
async function failedView(page: Page): Promise<void> {
  await page
    .locator('#views')
    .getByRole('link', { name: /^Failed/ })
    .click();
  await page.locator('#tasks tbody tr[data-id] td.error').first().waitFor();
}

describe('the dashboard with a scoped token', () => {
  it('is read-only with a read token: the queue shows, the buttons it may not use do not', async () => {
    const page = await open(READ);
    await page.locator('#views a', { hasText: 'Failed 1' }).waitFor();
    expect(await page.locator('#views a', { hasText: 'Pending' }).textContent()).toBe('Pending 3');
    expect(await page.locator('#tasks button', { hasText: 'Cancel' }).count()).toBe(0);
    await failedView(page);
    expect(await page.locator('#tasks td.error').first().textContent()).toBe('partner answered 503');
    // Let a few refreshes render: the buttons stay away, and nothing the page asked for was refused.
    for (let refreshes = 0; refreshes < 2; refreshes++) {
      const shown = await page.locator('#status').textContent();
      await page
        .locator('#status', { hasText: /^updated / })
        .filter({ hasNotText: shown ?? '' })
        .waitFor();
    }
    expect(await page.locator('#tasks button').count()).toBe(0);
    // No bulk bar below admin, and no box to tick.
    expect(await page.locator('#bulk').isVisible()).toBe(false);
    expect(await page.locator('#tasks input[type=checkbox]').count()).toBe(0);
    expect(await page.locator('#status').textContent()).toMatch(/^updated /);
    await page.context().close();
  });

  it('shows the buttons with a write token', async () => {
    const page = await open(WRITE);
    expect(await page.locator('#tasks button', { hasText: 'Cancel' }).count()).toBe(3);
    await failedView(page);
    expect(await page.locator('#tasks button', { hasText: 'Retry' }).count()).toBe(1);
    expect(await page.locator('#bulk').isVisible()).toBe(false);
    await page.context().close();
  });
});
