/**
 * The dashboard's token prompt in a real browser (Debian's chromium driven by playwright-core):
 * with a token required it sends nothing until one is entered (no 401 spent, no lock-out of the
 * address), a wrong token stops it at the first 401 with the form still up and saying so, a 429
 * keeps the form up with its own message, the right token shows the queue and who is signed in,
 * and Sign out asks again.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../helpers/browser.js';
import { serviceFixture } from '../helpers/fixture.js';

const TOKEN = 'dashboard-token-test-0123456789';
const fixture = serviceFixture('dashboard_token');
let browser: Browser;
let baseUrl: string;

/** Requests the service refused for their token: what a poll without a token would pile up. */
function refused(status: number): number {
  return fixture.service!.logs.filter((line) => line.msg === 'request refused' && line.statusCode === status).length;
}

async function start(env: Record<string, string> = {}) {
  fixture.service = await fixture.start({ API_TOKENS: `ops-desk:admin:${TOKEN}`, PORT: '0', ...env });
  baseUrl = await fixture.service.start();
  await fixture.service.call(
    'POST',
    '/tasks',
    { type: 'close_order', payload: { orderSn: 'T1' }, delayMs: 600_000 },
    { authorization: `Bearer ${TOKEN}` },
  );
}

async function open(): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(`${baseUrl}/console/tasks/pending`);
  await page.locator('#token-form').waitFor({ state: 'visible' });
  return page;
}

beforeAll(async () => {
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
});

describe('the token prompt', () => {
  it('sends nothing until a token is entered, stops at a wrong one, and signs in and out', async () => {
    await start();
    const page = await open();
    expect(await page.locator('#token-message').textContent()).toContain('needs its API token');
    // Three refresh periods with the prompt up: no request spent a wrong token.
    await page.waitForTimeout(6500);
    expect(refused(401)).toBe(0);
    expect(refused(429)).toBe(0);
    // An empty field sends nothing either.
    await page.click('#token-form button');
    expect(refused(401)).toBe(0);

    await page.fill('#token', 'not-the-token-0123456789');
    await page.click('#token-form button');
    await page.locator('#token-message', { hasText: 'not known here' }).waitFor();
    expect(await page.locator('#token-form').isVisible()).toBe(true);
    await page.waitForTimeout(4500);
    // One try, one 401: the dashboard stopped there instead of polling with it.
    expect(refused(401)).toBe(1);

    await page.fill('#token', TOKEN);
    await page.click('#token-form button');
    await page.locator('#tasks tbody tr[data-id]').first().waitFor();
    expect(await page.locator('#whoami').textContent()).toBe('signed in as ops-desk (admin)');
    expect(await page.locator('#token-form').isVisible()).toBe(false);

    await page.click('#sign-out');
    await page.locator('#token-form').waitFor({ state: 'visible' });
    expect(await page.locator('#token-message').textContent()).toBe('signed out');
    expect(
      await page.evaluate(() =>
        (globalThis as unknown as { sessionStorage: { getItem(key: string): string | null } }).sessionStorage.getItem('punctual.token'),
      ),
    ).toBeNull();
    expect(refused(401)).toBe(1);
  }, 60_000);

  it('keeps the form up, token field and all, with its own message on a 429', async () => {
    await start({ AUTH_FAILURES_PER_MINUTE: '1' });
    const page = await open();
    await page.fill('#token', 'wrong-token-number-one-0000');
    await page.click('#token-form button');
    await page.locator('#token-message', { hasText: 'not known here' }).waitFor();
    await page.fill('#token', 'wrong-token-number-two-0000');
    await page.click('#token-form button');
    await page.locator('#token-message', { hasText: 'too many wrong tokens from this address' }).waitFor();
    expect(await page.locator('#token-form').isVisible()).toBe(true);
    expect(await page.locator('#token').isVisible()).toBe(true);
    expect(refused(429)).toBe(1);
  }, 60_000);
});
