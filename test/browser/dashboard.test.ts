/**
 * The dashboard in a real browser (Debian's chromium driven by playwright-core): it shows the
 * backlog with live countdowns, recent runs and failures, and its buttons cancel and retry
 * through the API. A screenshot is kept in test-artifacts/.
 */
import { mkdirSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { createShopDatabase, makeOrders } from '../helpers/shop.js';

const TOKEN = 'dashboard-token-0123456789';
const orders = makeOrders(30, 20, 'DB');
let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;
let recovered = false;

/** Fails until the test lets it succeed: a task to retry from the page. */
const syncInventory = testHandler('sync_inventory', async () => {
  if (!recovered) throw new Error('inventory service answered 503');
});

async function status(id: number): Promise<string> {
  const [row] = await db.query<any[]>('SELECT status FROM tasks WHERE id = ?', [id]);
  return row.status;
}

beforeAll(async () => {
  db = await createShopDatabase('dashboard', orders);
  service = await startTestService(
    db,
    { API_TOKEN: TOKEN, PORT: '0', TIMEZONE: 'Asia/Shanghai' },
    { boot: false, handlers: [syncInventory] },
  );
  baseUrl = await service.start();
  browser = await launchBrowser();
}, 15 * 60_000); // installing chromium takes a while on a fresh machine

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

describe('the dashboard', () => {
  it('shows the queue live, and cancels and retries through the API', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const create = async (body: object) => (await service.call('POST', '/tasks', body, auth)).body.id as number;
    for (const [i, order] of orders.slice(0, 6).entries()) {
      await create({ type: 'close_order', payload: { orderSn: order.orderSn }, delayMs: 0, key: `close_order:${order.orderSn}` });
      await create({
        type: 'close_order',
        payload: { orderSn: orders[10 + i]!.orderSn },
        delayMs: 45_000 + i * 20_000,
        key: `close_order:${orders[10 + i]!.orderSn}`,
      });
    }
    await create({
      type: 'close_order',
      payload: { orderSn: orders[20]!.orderSn },
      runAt: '2026-12-24 20:00:00',
      timezone: 'Europe/Berlin',
    });
    const failing = await create({ type: 'sync_inventory', payload: { sku: 'A-100' }, delayMs: 0, maxAttempts: 1 });
    await waitFor(async () => (await status(failing)) === 'failed');
    // Due ten minutes ago with one second to start: it ends expired, never run.
    const expiring = await create({
      type: 'close_order',
      payload: { orderSn: orders[21]!.orderSn },
      runAt: new Date(Date.now() - 600_000).toISOString(),
      expireAfterMs: 1000,
    });
    await waitFor(async () => (await status(expiring)) === 'skipped');

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    // The page works under its Content-Security-Policy: the browser reports no violation.
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    page.on('pageerror', (error) => violations.push(error.message));
    const response = await page.goto(`${baseUrl}/`);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    expect(response?.headers()['x-frame-options']).toBe('DENY');
    // The page needs the token for the data, like any client.
    await page.locator('#token-form').waitFor({ state: 'visible' });
    await page.fill('#token', TOKEN);
    await page.click('#token-form button');
    await page.locator('#pending-tasks tbody tr[data-id]').first().waitFor();

    expect(await page.locator('#pending').textContent()).toBe('7');
    expect(await page.locator('#failed').textContent()).toBe('1');
    await page.locator('#recent-runs tbody tr[data-id]').nth(5).waitFor();
    expect(await page.locator('#p99').textContent()).toMatch(/^\d+ ms$/);
    const first = page.locator('#pending-tasks tbody tr[data-id]').first();
    expect(await first.locator('td').nth(4).textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d Asia\/Shanghai \(\+08:00\)$/);
    expect(await first.locator('td').nth(5).textContent()).toMatch(/Z$/);
    const berlin = page.locator('#pending-tasks tbody tr', { hasText: 'Europe/Berlin' });
    expect(await berlin.locator('td').nth(4).textContent()).toBe('2026-12-24 20:00:00 Europe/Berlin (+01:00)');
    // The countdown moves between refreshes.
    const before = await first.locator('td.countdown').textContent();
    await page.waitForTimeout(400);
    expect(await first.locator('td.countdown').textContent()).not.toBe(before);
    expect(await page.locator('#failed-tasks td.error').first().textContent()).toBe('inventory service answered 503');
    const expired = page.locator(`#skipped-tasks tbody tr[data-id="${expiring}"]`);
    await expired.waitFor();
    expect(await expired.locator('td').nth(3).textContent()).toBe('expired');
    expect(await expired.locator('td.error').textContent()).toMatch(/^expired: /);

    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/dashboard.png', fullPage: true });

    const cancelId = Number(await first.getAttribute('data-id'));
    await first.locator('button', { hasText: 'Cancel' }).click();
    await waitFor(async () => (await status(cancelId)) === 'cancelled', 5000, 'the cancel');
    await page.locator(`#pending-tasks tbody tr[data-id="${cancelId}"]`).waitFor({ state: 'detached' });

    recovered = true;
    await page.locator(`#failed-tasks tbody tr[data-id="${failing}"] button`).click();
    await waitFor(async () => (await status(failing)) === 'done', 5000, 'the retried task to run');
    await page.locator(`#failed-tasks tbody tr[data-id="${failing}"]`).waitFor({ state: 'detached' });
    expect(await page.locator('#status').textContent()).toContain(`task ${failing} will run again now`);
    // The token lives with the tab, not on disk.
    expect(
      await page.evaluate(() => {
        const storage = globalThis as unknown as Record<'sessionStorage' | 'localStorage', { getItem(key: string): string | null }>;
        return [storage.sessionStorage.getItem('punctual.token'), storage.localStorage.getItem('punctual.token')];
      }),
    ).toEqual([TOKEN, null]);
    expect(violations).toEqual([]);
    await page.close();
  });
});
