/**
 * The dashboard in a real browser (Debian's chromium driven by playwright-core): its views show
 * the backlog with live countdowns, the done, failed and skipped tasks, and its buttons cancel and
 * retry through the API after a confirmation. A screenshot is kept in test-artifacts/ (the docs'
 * copy is docs/dashboard.png).
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
  const [row] = await db.query<any[]>('SELECT status FROM punctual_tasks WHERE id = ?', [id]);
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
    // The overview first: the backlog at a glance.
    await page.locator('#pending', { hasText: '7' }).waitFor();
    expect(await page.locator('#failed').textContent()).toBe('1');
    await page.locator('#nav').getByRole('link', { name: 'Tasks', exact: true }).click();
    const rows = page.locator('#tasks tbody tr[data-id]');
    await rows.first().waitFor();
    const view = (name: string) => page.locator('#views').getByRole('link', { name: new RegExp(`^${name} `) });
    expect(await view('Pending').textContent()).toBe('Pending 7');
    expect(await view('Failed').textContent()).toBe('Failed 1');
    expect(await page.locator('#page-info').textContent()).toBe('1–7 of 7 · page 1 of 1');
    const first = rows.first();
    const column = async (name: string) => (await page.locator('#tasks thead th').allTextContents()).indexOf(name);
    expect(
      await first
        .locator('td')
        .nth(await column('local time'))
        .textContent(),
    ).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d Asia\/Shanghai \(\+08:00\)$/);
    expect(
      await first
        .locator('td')
        .nth(await column('UTC'))
        .textContent(),
    ).toMatch(/Z$/);
    const berlin = page.locator('#tasks tbody tr', { hasText: 'Europe/Berlin' });
    expect(
      await berlin
        .locator('td')
        .nth(await column('local time'))
        .textContent(),
    ).toBe('2026-12-24 20:00:00 Europe/Berlin (+01:00)');
    // The countdown moves between refreshes.
    const before = await first.locator('td.countdown').textContent();
    await page.waitForTimeout(400);
    expect(await first.locator('td.countdown').textContent()).not.toBe(before);

    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/dashboard.png', fullPage: true });

    await view('Done').click();
    await page.locator('#tasks tbody tr[data-id]').nth(5).waitFor();
    await page.locator('#nav').getByRole('link', { name: 'Overview', exact: true }).click();
    await page.locator('#p99', { hasText: /^\d+ ms$/ }).waitFor();
    await page.goBack();
    await view('Failed').click();
    await page.locator(`#tasks tbody tr[data-id="${failing}"]`).waitFor();
    expect(await page.locator('#tasks td.error').first().textContent()).toBe('inventory service answered 503');
    await view('Skipped').click();
    const expired = page.locator(`#tasks tbody tr[data-id="${expiring}"]`);
    await expired.waitFor();
    expect(
      await expired
        .locator('td')
        .nth(await column('why'))
        .textContent(),
    ).toBe('expired');
    expect(await expired.locator('td.error').textContent()).toMatch(/^expired: /);

    // Cancel asks first; confirmed, it cancels.
    await view('Pending').click();
    await page.locator('#tasks thead th', { hasText: 'runs in' }).waitFor();
    const cancelId = Number(await rows.first().getAttribute('data-id'));
    await rows.first().locator('button', { hasText: 'Cancel' }).click();
    await page.locator('#confirm[open]').waitFor();
    expect(await page.locator('#confirm-text').textContent()).toContain(`Cancel task ${cancelId}`);
    await page.getByRole('button', { name: 'Cancel the task' }).click();
    await waitFor(async () => (await status(cancelId)) === 'cancelled', 5000, 'the cancel');
    await page.locator(`#tasks tbody tr[data-id="${cancelId}"]`).waitFor({ state: 'detached' });

    recovered = true;
    await view('Failed').click();
    await page.locator(`#tasks tbody tr[data-id="${failing}"] button`, { hasText: 'Retry' }).click();
    await page.getByRole('button', { name: 'Retry the task' }).click();
    await waitFor(async () => (await status(failing)) === 'done', 5000, 'the retried task to run');
    await page.locator(`#tasks tbody tr[data-id="${failing}"]`).waitFor({ state: 'detached' });
    await page.locator('#status', { hasText: `task ${failing} will run again now` }).waitFor();
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
  it('shows the time runs waited for a pause apart from their lateness', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const typeState = async () =>
      ((await service.call('GET', '/types', undefined, auth)).body.types as { type: string; waiting: number }[]).find(
        (type) => type.type === 'close_order',
      )!;
    await service.call('POST', '/types/close_order/pause', {}, auth);
    const ids: number[] = [];
    for (const order of orders.slice(25, 28)) {
      const { body } = await service.call('POST', '/tasks', { type: 'close_order', payload: { orderSn: order.orderSn }, delayMs: 0 }, auth);
      ids.push(body.id as number);
    }
    // Held back by the pause, then let go: the three runs waited.
    await waitFor(async () => (await typeState()).waiting === 3, 10_000, 'the three closes to wait for the pause');
    await service.call('POST', '/types/close_order/resume', {}, auth);
    await waitFor(async () => (await Promise.all(ids.map(status))).every((s) => s === 'done'), 10_000, 'the closes to run');
    const page = await browser.newPage();
    await page.goto(`${baseUrl}/`);
    await page.getByLabel('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Use' }).click();
    const waited = page.locator('#waited');
    await waitFor(
      async () => /^\d+ runs?, p50 \d+ ms, p99 \d+ ms$/.test((await waited.textContent()) ?? ''),
      10_000,
      'the waits on the page',
    );
    expect(Number(/^(\d+)/.exec((await waited.textContent())!)![1])).toBeGreaterThanOrEqual(3);
    await page.close();
  });
});
