/**
 * The dashboard as an operator's console, in a real browser (Debian's chromium driven by
 * playwright-core) against a real punctual on MariaDB: views by state with their counts and pages,
 * search by id, key and tag, filters by type, tag and status, the task page (payload masked below
 * the write role, runs, next run), bulk cancel and retry after a confirmation (counted in the
 * database), the audit trail, the role, paused types, and all of it by keyboard with labelled
 * controls. Controls are found by their accessible names, as a reader of the page finds them.
 */
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'console-admin-token-0123456789';
const WRITE = 'console-write-token-0123456789';
const READ = 'console-read-token-0123456789';
const HOUR = 3_600_000;
const SECRET = 'Bearer shop-secret-4711';

let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;
let recovered = false;
let wall: number[] = [];
let hook: number;
let failedTagged: number[] = [];
let failedAlone: number;

const auth = { authorization: `Bearer ${ADMIN}` };

async function count(sql: string, values?: unknown[]): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

async function batch(tasks: unknown[]): Promise<number[]> {
  const { status, body } = await service.call('POST', '/tasks/batch', { tasks }, auth);
  expect(status).toBe(200);
  expect(body.refused).toBe(0);
  return body.results.map((r: { id: number }) => r.id);
}

beforeAll(async () => {
  db = await createTestDatabase('console');
  service = await startTestService(
    db,
    { API_TOKENS: `ops-alice:admin:${ADMIN},desk:write:${WRITE},wallboard:read:${READ}`, PORT: '0' },
    {
      boot: false,
      handlers: [
        testHandler('flaky', async () => {
          if (!recovered) throw new Error('partner answered 503');
        }),
        testHandler('quiet', async () => {}),
        testHandler('sleepy', async () => {}),
      ],
    },
  );
  baseUrl = await service.start();
  browser = await launchBrowser();
  // 120 pending with one tag, soonest first in key order; one more with a credential in its headers.
  wall = await batch(
    Array.from({ length: 120 }, (_, i) => ({
      type: 'quiet',
      payload: { i },
      delayMs: HOUR + i * 1000,
      key: `wall:${i}`,
      tags: ['wall:120'],
    })),
  );
  hook = (
    await batch([
      {
        type: 'quiet',
        payload: { url: 'https://shop.internal/hook', headers: { authorization: SECRET } },
        runAt: '2030-12-01 10:00:00',
        timezone: 'Asia/Shanghai',
        key: 'hook:1',
      },
    ])
  )[0]!;
  failedTagged = await batch(
    Array.from({ length: 3 }, (_, i) => ({ type: 'flaky', payload: { i }, delayMs: 0, maxAttempts: 1, tags: ['retry:me'] })),
  );
  failedAlone = (await batch([{ type: 'flaky', payload: {}, delayMs: 0, maxAttempts: 1 }]))[0]!;
  await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'failed'")) === 4, 10_000, 'four failures');
  expect((await service.call('POST', '/types/sleepy/pause', undefined, auth)).status).toBe(200);
}, 15 * 60_000);

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

const PAGE_WAIT_MS = 30_000;

/** The dashboard in a fresh context, signed in with `token`. */
async function open(token: string): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
  page.on('pageerror', (error) => {
    throw error;
  });
  // A wait returns as soon as its element shows; the room is for a loaded machine (a full
  // npm test once took longer than 10 s to show a task page's 404 after a navigation).
  page.setDefaultTimeout(PAGE_WAIT_MS);
  await page.goto(`${baseUrl}/console/tasks/pending`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Use' }).click();
  await page.locator('#tasks tbody tr[data-id]').first().waitFor();
  return page;
}

const view = (page: Page, name: string) => page.locator('#views').getByRole('link', { name: new RegExp(`^${name} `) });
const rows = (page: Page) => page.locator('#tasks tbody tr[data-id]');
const ids = async (page: Page): Promise<number[]> =>
  rows(page).evaluateAll((trs) => trs.map((tr) => Number((tr as unknown as { dataset: Record<string, string> }).dataset.id)));

async function filterBy(page: Page, fields: { type?: string; tag?: string; key?: string; status?: string }) {
  if (fields.status !== undefined) await page.getByLabel('Status', { exact: true }).selectOption(fields.status);
  if (fields.type !== undefined) await page.getByLabel('Type', { exact: true }).selectOption(fields.type);
  await page.getByLabel('Tag', { exact: true }).fill(fields.tag ?? '');
  await page.getByLabel('Key starts with', { exact: true }).fill(fields.key ?? '');
  await page.getByRole('button', { name: 'Filter', exact: true }).click();
}

/** The one search box: an id, a key or the start of keys, without saying which. */
async function search(page: Page, text: string) {
  await page.getByLabel('Search tasks', { exact: true }).fill(text);
  await page.getByRole('button', { name: 'Find' }).click();
}

/** A view of the console by its link in the header. */
async function go(page: Page, name: string) {
  await page.locator('#nav').getByRole('link', { name, exact: true }).click();
}

/** Presses Tab until `target` has the focus (at most 400 times: a page of rows is 150 stops): the keyboard alone reaches it. */
async function tabTo(page: Page, target: Locator) {
  for (let i = 0; i < 400; i++) {
    if (await target.evaluate((el) => el === el.ownerDocument.activeElement).catch(() => false)) return;
    await page.keyboard.press('Tab');
  }
  throw new Error(`Tab never reached ${target.toString()}`);
}

describe('the console', { timeout: 90_000 }, () => {
  it('shows each view with its count and pages through it: 120 pending, 50 a page, page 3 holds 20', async () => {
    const page = await open(ADMIN);
    await filterBy(page, { tag: 'wall:120' });
    await page.locator('#page-info', { hasText: 'of 120' }).waitFor();
    expect(await view(page, 'Pending').textContent()).toBe('Pending 120');
    expect(await page.locator('#page-info').textContent()).toBe('1–50 of 120 · page 1 of 3');
    expect(await ids(page)).toEqual(wall.slice(0, 50));
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-info', { hasText: 'page 2 of 3' }).waitFor();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-info', { hasText: 'page 3 of 3' }).waitFor();
    expect(await page.locator('#page-info').textContent()).toBe('101–120 of 120 · page 3 of 3');
    expect(await rows(page).count()).toBe(20);
    expect(await ids(page)).toEqual(wall.slice(100));
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.locator('#page-info', { hasText: 'page 2 of 3' }).waitFor();
    expect(await ids(page)).toEqual(wall.slice(50, 100));

    // Without the filter, every view counts the whole table; cancelled and skipped have views too.
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await page.locator('#views a', { hasText: 'Pending 121' }).waitFor();
    expect(await view(page, 'Failed').textContent()).toBe('Failed 4');
    expect(await view(page, 'Cancelled').textContent()).toBe('Cancelled 0');
    expect(await view(page, 'Skipped').textContent()).toBe('Skipped 0');
    await view(page, 'Cancelled').click();
    await page.locator('#tasks td.empty', { hasText: 'nothing here' }).waitFor();
    await page.context().close();
  });

  it('finds by id, key or key prefix in one box, says when nothing matches, and filters by tag, type and status', async () => {
    const page = await open(ADMIN);
    await search(page, String(wall[7]));
    await page.locator('#task-title', { hasText: `Task ${wall[7]}` }).waitFor();
    await page.locator('#task-fields [data-field="key"] dd', { hasText: 'wall:7' }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/console/task/${wall[7]}`);
    await search(page, 'hook:1');
    await page.locator('#task-title', { hasText: `Task ${hook}` }).waitFor();
    // The back button goes back a view: the task found before.
    await page.goBack();
    await page.locator('#task-title', { hasText: `Task ${wall[7]}` }).waitFor();
    await page.getByRole('button', { name: 'Back to the list' }).click();
    // A key that names no task lists the tasks whose keys start with it, and says so; the next reading does not wipe it.
    await search(page, 'wall:');
    await page.locator('#search-message', { hasText: 'no task has the key wall: (120 tasks’ keys start with it)' }).waitFor();
    await page.locator('#status', { hasText: /^updated / }).waitFor();
    expect(await page.locator('#search-message').textContent()).toContain('no task has the key wall:');
    await page.locator('#page-info', { hasText: '1–50 of 120' }).waitFor();
    expect(await page.locator('#view-note').textContent()).toBe('only key starts with wall:');
    await filterBy(page, { key: 'wall:11' });
    await page.locator('#page-info', { hasText: 'of 11 ' }).waitFor();
    expect(await ids(page)).toEqual([wall[11], ...wall.slice(110, 120)]);

    // Nothing matches: said, and it stays.
    await search(page, 'no-such-order-SN999');
    await page.locator('#search-message', { hasText: 'nothing matches no-such-order-SN999' }).waitFor();
    await page.locator('#status', { hasText: /^updated / }).waitFor();
    expect(await page.locator('#search-message').textContent()).toContain('nothing matches');

    await page.getByRole('button', { name: 'Clear filters' }).click();
    await filterBy(page, { tag: 'retry:me' });
    await page.locator('#views a', { hasText: 'Failed 3' }).waitFor();
    expect(await view(page, 'Pending').textContent()).toBe('Pending 0');
    await view(page, 'Failed').click();
    await page.locator('#page-info', { hasText: '1–3 of 3' }).waitFor();
    expect((await ids(page)).sort()).toEqual([...failedTagged].sort());

    await page.getByRole('button', { name: 'Clear filters' }).click();
    await filterBy(page, { type: 'flaky', status: 'failed' });
    await page.locator('#page-info', { hasText: '1–4 of 4' }).waitFor();
    expect((await ids(page)).sort()).toEqual([...failedTagged, failedAlone].sort());
    expect(await view(page, 'Failed').getAttribute('aria-current')).toBe('page');
    await filterBy(page, { type: 'quiet', status: 'pending' });
    await page.locator('#page-info', { hasText: 'of 121' }).waitFor();
    await page.context().close();
  });

  it('shows a task page: its payload masked for a read token and whole for write and admin, its runs, its next run', async () => {
    const reader = await open(READ);
    expect(await reader.locator('#whoami').textContent()).toBe('signed in as wallboard (read)');
    await search(reader, String(hook));
    await reader.locator('#task-payload', { hasText: 'authorization' }).waitFor();
    const masked = JSON.parse((await reader.locator('#task-payload').textContent())!);
    expect(masked.headers).toEqual({ authorization: '***' });
    expect(await reader.locator('#task-payload').textContent()).not.toContain('shop-secret');
    expect(await reader.locator('#payload-note').textContent()).toContain('masked');
    expect(await reader.locator('#task-fields [data-field="next run"] dd').textContent()).toMatch(
      /^2030-12-01 10:00:00 Asia\/Shanghai \(\+08:00\), in \d+ d \d+ h$/,
    );
    expect(await reader.locator('#task-actions button').count()).toBe(0);
    await reader.context().close();

    for (const token of [WRITE, ADMIN]) {
      const page = await open(token);
      // A task's address can be shared: it opens in a new tab (same session) straight on the task.
      await page.goto(`${baseUrl}/console/task/${hook}`);
      await page.locator('#task-payload', { hasText: 'authorization' }).waitFor();
      expect(JSON.parse((await page.locator('#task-payload').textContent())!).headers).toEqual({ authorization: SECRET });
      expect(await page.locator('#task-actions').getByRole('button', { name: 'Cancel' }).count()).toBe(1);
      await page.context().close();
    }

    const page = await open(ADMIN);
    await search(page, String(failedAlone));
    const run = page.locator('#task-runs tbody tr[data-run]');
    await run.first().waitFor();
    expect(await run.count()).toBe(1);
    expect(await run.locator('td').nth(1).textContent()).toBe('failed');
    expect(await run.locator('td.error').textContent()).toBe('partner answered 503');
    expect(await page.locator('#task-fields [data-field="next run"] dd').textContent()).toMatch(/^none: it failed for good/);
    await page.goto(`${baseUrl}/console/task/999999`);
    await page.locator('#task-message', { hasText: 'there is no task 999999' }).waitFor();
    await page.context().close();
  });

  it('is all reachable by keyboard, with a label on every control', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
    page.setDefaultTimeout(PAGE_WAIT_MS);
    await page.goto(`${baseUrl}/console/tasks/pending`);
    await tabTo(page, page.getByLabel('API token'));
    await page.keyboard.type(ADMIN);
    await page.keyboard.press('Enter');
    await rows(page).first().waitFor();
    expect(await page.locator('#whoami').textContent()).toBe('signed in as ops-alice (admin)');

    // Every control has an accessible name: a label, or a label of its own.
    const unnamed = await page
      .locator('input, select, textarea')
      .evaluateAll((els) =>
        els
          .filter((el) => (el as unknown as { labels: { length: number } | null }).labels?.length === 0 && !el.getAttribute('aria-label'))
          .map((el) => el.outerHTML),
      );
    expect(unnamed).toEqual([]);

    await tabTo(page, view(page, 'Failed'));
    await page.keyboard.press('Enter');
    await page.locator('#views a[aria-current="page"]', { hasText: 'Failed' }).waitFor();
    await tabTo(page, view(page, 'Pending'));
    await page.keyboard.press('Enter');
    await tabTo(page, page.getByLabel('Tag', { exact: true }));
    await page.keyboard.type('wall:120');
    await page.keyboard.press('Enter');
    await page.locator('#page-info', { hasText: '1–50 of 120' }).waitFor();
    await tabTo(page, page.getByRole('button', { name: 'Next page' }));
    await page.keyboard.press('Enter');
    await page.locator('#page-info', { hasText: '51–100 of 120' }).waitFor();
    const box = page.getByRole('checkbox', { name: `select task ${wall[50]}`, exact: true });
    await tabTo(page, box);
    await page.keyboard.press('Space');
    expect(await box.isChecked()).toBe(true);
    await tabTo(page, page.getByRole('button', { name: 'Cancel selected (1)' }));
    await page.keyboard.press('Enter');
    await page.locator('#confirm[open]').waitFor();
    // The dialog opens on "Go back": Enter there changes nothing.
    await page.keyboard.press('Enter');
    await page.locator('#confirm:not([open])').waitFor({ state: 'attached' });
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'")).toBe(0);

    await tabTo(page, page.getByRole('link', { name: `task ${wall[51]}`, exact: true }));
    await page.keyboard.press('Enter');
    await page.locator('#task-title', { hasText: `Task ${wall[51]}` }).waitFor();
    await tabTo(page, page.getByRole('button', { name: 'Back to the list' }));
    await page.keyboard.press('Enter');
    await page.locator('#console').waitFor({ state: 'visible' });
    await page.context().close();
  });

  it('cancels a selection after a confirmation, exactly those tasks, and the audit trail shows who', async () => {
    const page = await open(ADMIN);
    expect(await page.locator('#whoami').textContent()).toBe('signed in as ops-alice (admin)');
    await filterBy(page, { tag: 'wall:120' });
    await page.locator('#page-info', { hasText: '1–50 of 120' }).waitFor();
    const chosen = [wall[2]!, wall[5]!, wall[9]!];
    for (const id of chosen) await page.getByRole('checkbox', { name: `select task ${id}`, exact: true }).check();
    await page.getByRole('button', { name: 'Cancel selected (3)' }).click();
    await page.locator('#confirm[open]').waitFor();
    expect(await page.locator('#confirm-text').textContent()).toContain(chosen.join(', '));
    // Go back on the dialog: nothing is sent, nothing changes.
    await page.getByRole('button', { name: 'Go back' }).click();
    await page.locator('#status', { hasText: 'nothing was changed' }).waitFor();
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'")).toBe(0);

    await page.getByRole('button', { name: 'Cancel selected (3)' }).click();
    await page.getByRole('button', { name: 'Cancel 3 tasks' }).click();
    await page.locator('#status', { hasText: '3 of 3 tasks cancelled' }).waitFor();
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'")).toBe(3);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled' AND id IN (?)", [chosen])).toBe(3);
    await page.locator('#views a', { hasText: 'Cancelled 3' }).waitFor();
    await page.locator('#page-info', { hasText: 'of 117' }).waitFor();

    await go(page, 'Audit');
    const entry = page.locator('#audit-entries tbody tr', { hasText: 'bulk-cancel' });
    await entry.waitFor();
    expect(await entry.locator('td').allTextContents()).toEqual([
      expect.stringMatching(/Z$/),
      'ops-alice',
      'admin',
      'bulk-cancel',
      `ids:${chosen.join(',')}`,
      '200',
    ]);
    await page.goBack();
    await page.locator('#page-info', { hasText: '1–50 of 117' }).waitFor();

    // A whole page ticked at once; when its tasks are gone, the last page there is shows.
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-info', { hasText: '101–117 of 117 · page 3 of 3' }).waitFor();
    const last = await ids(page);
    await page.getByLabel('Select all on this page').check();
    await page.getByRole('button', { name: 'Cancel selected (17)' }).click();
    await page.getByRole('button', { name: 'Cancel 17 tasks' }).click();
    await page.locator('#page-info', { hasText: '51–100 of 100 · page 2 of 2' }).waitFor();
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled' AND id IN (?)", [last])).toBe(17);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'")).toBe(20);
    await page.context().close();
  });

  it('retries every failed task of a tag after a confirmation, and no other', async () => {
    recovered = true;
    const page = await open(ADMIN);
    await filterBy(page, { tag: 'retry:me' });
    await view(page, 'Failed').click();
    await page.locator('#page-info', { hasText: '1–3 of 3' }).waitFor();
    await page.getByRole('button', { name: 'Retry all 3 failed with tag retry:me' }).click();
    expect(await page.locator('#confirm-text').textContent()).toContain('retry:me');
    expect(await page.locator('#confirm-text').textContent()).toContain('(3 now)');
    await page.getByRole('button', { name: 'Retry all 3', exact: true }).click();
    await waitFor(
      async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [failedTagged])) === 3,
    );
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'failed'", [failedAlone])).toBe(1);
    await go(page, 'Audit');
    await page.locator('#audit-entries tbody tr', { hasText: 'tag:retry:me' }).waitFor();
    await page.context().close();
  });

  it('highlights a paused type, and hides the bulk changes and the audit trail below admin', async () => {
    const page = await open(WRITE);
    expect(await page.locator('#whoami').textContent()).toBe('signed in as desk (write)');
    await page.locator('#paused-note', { hasText: 'paused: sleepy' }).waitFor();
    expect(await page.locator('#bulk').isVisible()).toBe(false);
    await go(page, 'Types');
    await page.locator('#task-types tr.paused').waitFor();
    expect(
      await page
        .locator('#task-types tr.paused')
        .evaluateAll((trs) => trs.map((tr) => (tr as unknown as { dataset: Record<string, string> }).dataset.type)),
    ).toEqual(['sleepy']);
    expect(await page.locator('#nav').getByRole('link', { name: 'Audit' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('#token-form').waitFor({ state: 'visible' });
    await page.context().close();
  });
});
