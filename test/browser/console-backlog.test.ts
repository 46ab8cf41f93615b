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
import { waitFor } from '../helpers/server.js';
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

const auth = { authorization: `Bearer ${ADMIN}` };

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

/** The id of the task with key close_order:SN<sn>. */
async function idOf(sn: number): Promise<number> {
  return count('SELECT id AS n FROM punctual_tasks WHERE task_key = ?', [`close_order:SN${sn}`]);
}

async function confirmSays(page: Page, text: string | RegExp, answer: 'yes' | 'no'): Promise<void> {
  await page.locator('#confirm-text', { hasText: text }).waitFor();
  await page.locator(answer === 'yes' ? '#confirm-yes' : '#confirm-no').click();
}

/** `problem` sits just below or beside `field`, in view. */
async function besides(page: Page, field: string, problem: string): Promise<void> {
  const [a, b] = [await page.locator(field).boundingBox(), await page.locator(problem).boundingBox()];
  expect(a).not.toBeNull();
  expect(b).not.toBeNull();
  expect(b!.y - (a!.y + a!.height)).toBeLessThan(120);
  expect(b!.y).toBeGreaterThanOrEqual(a!.y - 40);
}

describe.each(VIEWPORTS)('a move into the past (%s)', (name, size) => {
  it('says the task runs now before it sends it, and a run let through is late by seconds, not 56 years', async () => {
    const id = await idOf(name === 'wide' ? 104_501 : 104_502);
    const page = await open(size, `/console/task/${id}`);
    await page.getByRole('button', { name: 'Reschedule' }).click();
    await page.getByLabel('New time').fill('1970-01-01T00:00:01');
    await page.getByLabel('in zone').fill('UTC');
    await page.getByRole('button', { name: 'Move it' }).click();
    await confirmSays(page, `Move task ${id} to 1970-01-01 00:00:01 UTC?`, 'yes');
    await confirmSays(page, 'is already past: task', 'no');
    await page.locator('#reschedule-problem', { hasText: 'That time is already past: nothing was moved.' }).waitFor();
    await besides(page, '#reschedule-at', '#reschedule-problem');
    expect(
      await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'pending' AND run_at > UTC_TIMESTAMP(3)", [id]),
    ).toBe(1);

    await page.getByRole('button', { name: 'Move it' }).click();
    await confirmSays(page, 'Move task', 'yes');
    await confirmSays(page, 'would run now, at once. Run it now?', 'yes');
    const lateness = await waitFor(async () => {
      const [row] = await db.query<any[]>("SELECT lateness_ms FROM punctual_tasks WHERE id = ? AND status = 'done'", [id]);
      return row === undefined ? undefined : Number(row.lateness_ms);
    });
    expect(lateness).toBeGreaterThanOrEqual(0);
    expect(lateness).toBeLessThan(5_000);
    await page.context().close();
  });
});

describe.each(VIEWPORTS)('pause and resume (%s)', (_name, size) => {
  it('ask first, for the whole fleet; going back changes nothing', async () => {
    const paused = async () =>
      (await service.call('GET', '/types', undefined, auth)).body.types.find((t: any) => t.type === 'coupon_expire').paused;
    const page = await open(size, '/console/types');
    const pause = page.getByRole('button', { name: 'Pause coupon_expire' });
    await pause.click();
    await confirmSays(page, 'Pause coupon_expire on every process of the fleet?', 'no');
    await page.locator('#status', { hasText: 'nothing was changed' }).waitFor();
    expect(await paused()).toBe(false);
    await pause.click();
    expect(await page.locator('#confirm-yes').getAttribute('class')).toContain('danger');
    await confirmSays(page, 'None of its tasks starts until it is resumed', 'yes');
    await waitFor(paused, 5000, 'the pause');
    await page.getByRole('button', { name: 'Resume coupon_expire' }).click();
    await confirmSays(page, 'Resume coupon_expire on every process of the fleet?', 'yes');
    await waitFor(async () => !(await paused()), 5000, 'the resume');
    await page.context().close();
  });
});

describe.each(VIEWPORTS)('refusals beside their fields (%s)', (name, size) => {
  it("a payload's, in plain words with the limit, kept until the field changes", async () => {
    const id = await idOf(name === 'wide' ? 104_503 : 104_504);
    const page = await open(size, `/console/task/${id}`);
    await page.getByRole('button', { name: 'Edit payload' }).click();
    const field = page.getByLabel('New payload (JSON)');
    await field.fill('{');
    await page.getByRole('button', { name: 'Save payload' }).click();
    await page.locator('#payload-problem', { hasText: 'This is not JSON' }).waitFor();
    await besides(page, '#payload-edit', '#payload-problem');
    // The next edit clears it.
    await field.fill('{"orderSn": "SN1"');
    expect(await page.locator('#payload-problem').textContent()).toBe('');
    await field.fill(JSON.stringify({ note: 'x'.repeat(1024 * 1024) }));
    await page.getByRole('button', { name: 'Save payload' }).click();
    await confirmSays(page, 'Replace the payload', 'yes');
    const problem = page.locator('#payload-problem', { hasText: 'larger than the limit of 131072 bytes (128 KiB)' });
    await problem.waitFor();
    await besides(page, '#payload-edit', '#payload-problem');
    // Still there after the page read the task again twice.
    for (let reads = 0; reads < 2; reads++) await page.waitForResponse((response) => response.url().endsWith(`/tasks/${id}`));
    expect(await problem.isVisible()).toBe(true);
    await page.context().close();
  });

  it("a type limit's, beside its field, naming the range", async () => {
    const page = await open(size, '/console/types/member_reset');
    await page.getByLabel('At once (empty: no limit)').fill('1000000000');
    await page.getByRole('button', { name: 'Set limits' }).click();
    await confirmSays(page, 'Set the limits of member_reset', 'yes');
    await page.locator('#limit-concurrency-problem', { hasText: 'maxConcurrency must be <= 10000, or null' }).waitFor();
    await besides(page, '#limit-concurrency', '#limit-concurrency-problem');
    await page.context().close();
  });
});

describe.each(VIEWPORTS)('the Failed view (%s)', (name, size) => {
  it('retries all failed with or without a type filter, and its delete all looks destructive and names the count', async () => {
    const tag = `failed-${name}`;
    const rows = Array.from(
      { length: 207 },
      (_, i) =>
        `('${tag}:${i}', '${TYPES[i % TYPES.length]}', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 HOUR, UTC_TIMESTAMP(3) - INTERVAL 1 HOUR, 'failed', UTC_TIMESTAMP(3), 'partner answered 503')`,
    );
    await db.execute(
      `INSERT INTO punctual_tasks (task_key, type, payload, run_at, requested_run_at, status, finished_at, last_error) VALUES ${rows.join(', ')}`,
    );
    const failedOf = (type?: string) =>
      count(
        `SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'failed'${type === undefined ? '' : ' AND type = ?'}`,
        type === undefined ? [] : [type],
      );
    const page = await open(size, '/console/tasks/failed?type=sale_end');
    const ofType = await failedOf('sale_end');
    const deleteTyped = page.getByRole('button', { name: `Delete all ${ofType} failed with type sale_end` });
    await deleteTyped.waitFor();
    expect(await deleteTyped.getAttribute('class')).toContain('danger');
    await deleteTyped.click();
    await confirmSays(page, `Delete every failed task with the type sale_end (${ofType} now)`, 'yes');
    await waitFor(async () => (await failedOf('sale_end')) === 0, 10_000, 'the delete');

    await page.goto(`${baseUrl}/console/tasks/failed`);
    const left = await failedOf();
    const retryAll = page.getByRole('button', { name: `Retry all ${left} failed`, exact: true });
    await retryAll.waitFor();
    // Retry and delete are apart, and only delete looks destructive.
    expect((await retryAll.getAttribute('class')) ?? '').not.toContain('danger');
    const [retryBox, deleteBox] = [await retryAll.boundingBox(), await page.locator('#all-delete').boundingBox()];
    expect(Math.abs(retryBox!.x - deleteBox!.x) + Math.abs(retryBox!.y - deleteBox!.y)).toBeGreaterThan(24);
    await retryAll.click();
    await confirmSays(page, `Run every failed task (${left} now) again now, on every page?`, 'yes');
    await page.locator('#status', { hasText: `${left} of ${left} tasks will run again` }).waitFor();
    await waitFor(async () => (await failedOf()) === 0, 10_000, 'the retry');
    await db.execute('DELETE FROM punctual_tasks WHERE task_key LIKE ?', [`${tag}:%`]);
    await page.context().close();
  });
});

describe.each(VIEWPORTS)('the Running view (%s)', (name, size) => {
  it('shows the start, the attempt the task says, the lease holder and end, flags a stuck lease and releases it', async () => {
    const inserted = await db.execute(
      `INSERT INTO punctual_tasks (task_key, type, payload, run_at, status, attempts, max_attempts, lease_owner, lease_until, updated_at) VALUES
       ('running-${name}:held', 'sale_start', '{}', UTC_TIMESTAMP(3) - INTERVAL 5 MINUTE, 'running', 1, 4, 'host-a:4242', UTC_TIMESTAMP(3) + INTERVAL 1 HOUR, UTC_TIMESTAMP(3) - INTERVAL 2 MINUTE),
       ('running-${name}:stuck', 'sale_start', '{}', UTC_TIMESTAMP(3) - INTERVAL 5 MINUTE, 'running', 2, 4, 'pull:a-worker-token', UTC_TIMESTAMP(3) + INTERVAL 2 SECOND, UTC_TIMESTAMP(3) - INTERVAL 3 MINUTE)`,
    );
    const [held, stuck] = [inserted.insertId, inserted.insertId + 1];
    const page = await open(size, '/console/tasks/running');
    const row = (id: number) => page.locator(`#tasks tr[data-id="${id}"]`);
    await row(held).waitFor();
    const heldText = (await row(held).locator('td').allTextContents()).join(' | ');
    expect(heldText).toContain('1/4');
    expect(heldText).toContain('host-a:4242');
    expect(heldText).not.toContain('stuck');
    // Its lease runs out 2 s after it was written: the view flags it then, by itself.
    await row(stuck).locator('td.stuck').waitFor();
    const stuckText = (await row(stuck).locator('td').allTextContents()).join(' | ');
    expect(stuckText).toContain('2/4');
    expect(stuckText).toMatch(/pull:[0-9a-f]{12}/);
    expect(stuckText).not.toContain('a-worker-token');
    expect(stuckText).toContain('stuck: ran out');
    expect(await row(held).getByRole('button', { name: 'Release lease' }).count()).toBe(0);
    await row(stuck).getByRole('button', { name: 'Release lease' }).click();
    await confirmSays(page, 'Release the stuck lease of', 'yes');
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'running'", [stuck])) === 0);
    // On the trail once the answer is sent (after the release committed).
    const entry = await waitFor(async () => {
      const [row] = await db.query<any[]>("SELECT actor FROM punctual_audit_log WHERE action = 'release-lease' AND target = ?", [
        `task:${stuck}`,
      ]);
      return row;
    });
    expect(entry.actor).toBe('ops-alice');
    await db.execute('DELETE FROM punctual_tasks WHERE id IN (?)', [[held, stuck]]);
    await page.context().close();
  });
});

/** WCAG contrast of two computed colours (`rgb(…)`). */
function contrast(a: string, b: string): number {
  const lum = (color: string) => {
    const [r, g, bl] = (color.match(/[\d.]+/g) ?? []).slice(0, 3).map((part) => {
      const c = Number(part) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}

/** The colour of `selector`'s text and the background it sits on (the first ancestor with one). */
async function colours(page: Page, selector: string): Promise<[string, string]> {
  return page
    .locator(selector)
    .first()
    .evaluate((element) => {
      const getComputedStyle = (globalThis as any).getComputedStyle as (node: unknown) => { color: string; backgroundColor: string };
      let node: any = element;
      let background = 'rgb(255, 255, 255)';
      while (node !== null) {
        const value = getComputedStyle(node).backgroundColor;
        if (value !== 'rgba(0, 0, 0, 0)' && value !== 'transparent') {
          background = value;
          break;
        }
        node = node.parentElement;
      }
      return [getComputedStyle(element).color, background] as [string, string];
    });
}

describe.each(VIEWPORTS)('reading and working it (%s)', (name, size) => {
  it('keeps every row, key and action in view, with targets of 24 px', async () => {
    const page = await open(size);
    const first = page.locator('#tasks tbody tr[data-id]').first();
    await first.waitFor();
    // Nothing wider than the screen (named when something is).
    const wide = await page.evaluate(
      (width) =>
        [...(globalThis as any).document.querySelectorAll('body *')]
          .filter((element: any) => element.getBoundingClientRect().right > width + 1 && element.closest('.scroll, #nav, #views') === null)
          .slice(0, 10)
          .map(
            (element: any) =>
              `${element.tagName}#${element.id}.${element.className} ${Math.round(element.getBoundingClientRect().left)}-${Math.round(element.getBoundingClientRect().right)}`,
          ),
      size.width,
    );
    expect(wide).toEqual([]);
    const box = (await first.boundingBox())!;
    expect(box.y).toBeLessThan(size.height - 100);
    const key = (await first.locator('td.key').boundingBox())!;
    // A key on one or two lines, not one character a line.
    expect(key.height).toBeLessThan(48);
    const run = (await first.getByRole('button', { name: 'Run now' }).boundingBox())!;
    expect(run.x + run.width).toBeLessThanOrEqual(size.width);
    const small = await page.locator('main button:visible, main input[type=checkbox]:visible').evaluateAll((elements) =>
      elements
        .map((element) => element.getBoundingClientRect())
        .filter((rect) => rect.width > 0 && (rect.height < 24 || rect.width < 24))
        .map((rect) => `${rect.width}×${rect.height}`),
    );
    expect(small).toEqual([]);
    await page.context().close();
  });

  it('has a skip link, a quiet status line and text of 4.5:1, light and dark', async () => {
    const page = await open(size);
    await page.locator('#tasks tbody tr[data-id]').first().waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe('Skip to the content');
    await page.keyboard.press('Enter');
    // The focus is in the view, past the header.
    expect(
      await page.evaluate(() => (globalThis as any).document.querySelector('main')?.contains((globalThis as any).document.activeElement)),
    ).toBe(true);

    // Two readings go by: shown, not announced.
    expect(await page.locator('#status').getAttribute('role')).toBeNull();
    const said = await page.locator('#announce').textContent();
    const shown = await page.locator('#status').textContent();
    await page.waitForFunction((before) => (globalThis as any).document.querySelector('#status')?.textContent !== before, shown);
    await page.waitForFunction(
      (before) => (globalThis as any).document.querySelector('#status')?.textContent !== before,
      await page.locator('#status').textContent(),
    );
    expect(await page.locator('#announce').textContent()).toBe(said);

    for (const selector of ['#status', '#page-info', 'button:disabled']) {
      const [fg, bg] = await colours(page, selector);
      expect(contrast(fg, bg), `${selector} ${fg} on ${bg}`).toBeGreaterThanOrEqual(4.5);
    }
    await page.context().close();

    const dark = await (await browser.newContext({ viewport: size, colorScheme: 'dark' })).newPage();
    await dark.goto(`${baseUrl}/console/tasks/pending`);
    await dark.getByLabel('API token').fill(ADMIN);
    await dark.getByRole('button', { name: 'Use' }).click();
    await dark.locator('#tasks tbody tr[data-id]').first().waitFor();
    const [fg, bg] = await colours(dark, '#tasks td.key');
    expect(contrast('rgb(0, 0, 0)', bg), `a dark background, ${bg}`).toBeLessThan(2);
    expect(contrast(fg, bg)).toBeGreaterThanOrEqual(4.5);
    for (const selector of ['#status', 'button:disabled']) {
      const [text, under] = await colours(dark, selector);
      expect(contrast(text, under), `${name} dark ${selector}`).toBeGreaterThanOrEqual(4.5);
    }
    await dark.context().close();
  });
});
