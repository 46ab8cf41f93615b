/**
 * The console's views and actions, each in a phone's layout (390 px) and a desk's (1,440 px), in
 * Debian's chromium against a real punctual on MariaDB: every view opened by its own address (a
 * shared link), the login page, one search that finds an order's task by its key, and the
 * actions an operator needs on sale day — run now, reschedule, edit a payload, delete, retry and
 * delete all failed of a type, delete a selection — each after a confirmation and checked in the
 * database; the last hour's figures, read from the run history, the same after a restart.
 * Screenshots of each view go to test-artifacts/console/.
 */
import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ADMIN = 'views-admin-token-0123456789';
const READ = 'views-read-token-0123456789';
const HOUR = 3_600_000;
const ENV = { API_TOKENS: `ops-alice:admin:${ADMIN},wallboard:read:${READ}`, PORT: '0' };
const LAYOUTS = [
  { name: 'narrow', width: 390, height: 844 },
  { name: 'wide', width: 1440, height: 900 },
] as const;
type Layout = (typeof LAYOUTS)[number];

let db: TestDatabase;
let service: TestService;
let browser: Browser;
let baseUrl: string;
let recovered = false;

const handlers = () => [
  testHandler('flaky', async () => {
    if (!recovered) throw new Error('partner answered 503');
  }),
  testHandler('quiet', async () => {}),
  testHandler('closes', async () => 'closed'),
];
const auth = { authorization: `Bearer ${ADMIN}` };

async function count(sql: string, values?: unknown[]): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

async function create(task: Record<string, unknown>): Promise<number> {
  const { status, body } = await service.call('POST', '/tasks', task, auth);
  expect(status).toBe(201);
  return body.id as number;
}

async function failed(n: number, tags: string[] = []): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < n; i++) ids.push(await create({ type: 'flaky', payload: { i }, delayMs: 0, maxAttempts: 1, tags }));
  await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'failed'", [ids])) === n);
  return ids;
}

beforeAll(async () => {
  db = await createTestDatabase('console_views');
  service = await startTestService(db, ENV, { handlers: handlers() });
  baseUrl = await service.start();
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await db?.drop();
});

/** A fresh tab at `path` in `layout`, signed in with `token` on the login page. */
async function open(layout: Layout, path: string, token = ADMIN): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: layout.width, height: layout.height } })).newPage();
  page.on('pageerror', (error) => {
    throw error;
  });
  page.setDefaultTimeout(10_000);
  await page.goto(`${baseUrl}${path}`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Use' }).click();
  await page.locator('#whoami').waitFor();
  return page;
}

/** The page is no wider than the screen: on a phone the tables scroll inside their box, the page does not. */
async function fitsWidth(page: Page): Promise<boolean> {
  // Runs in the page: its globals are the browser's, which this file's types do not know.
  const wide: string[] = await page.evaluate(() => {
    const g = globalThis as any;
    const width = g.innerWidth + 1;
    if (g.document.documentElement.scrollWidth <= width) return [];
    return [...g.document.querySelectorAll('body *')]
      .filter((el: any) => el.getBoundingClientRect().right > width && el.closest('.scroll') === null)
      .slice(0, 5)
      .map((el: any) => `${el.tagName}#${el.id}.${el.className}`);
  });
  if (wide.length > 0) console.log('wider than the screen:', wide.join(' '));
  return wide.length === 0;
}

async function shot(page: Page, layout: Layout, view: string) {
  mkdirSync('test-artifacts/console', { recursive: true });
  await page.screenshot({ path: `test-artifacts/console/${view}-${layout.name}.png`, fullPage: true });
}

const confirm = async (page: Page, yes: string) => {
  await page.locator('#confirm[open]').waitFor();
  await page.getByRole('button', { name: yes, exact: true }).click();
};

describe.each(LAYOUTS)('the console, $name ($width px)', (layout) => {
  it('is a login page until a token works, then the view the address named', async () => {
    const id = await create({ type: 'quiet', payload: { orderSn: `LOGIN-${layout.name}` }, delayMs: HOUR });
    const page = await (await browser.newContext({ viewport: { width: layout.width, height: layout.height } })).newPage();
    await page.goto(`${baseUrl}/console/task/${id}`);
    await page.locator('#token-form').waitFor();
    // Only the form: no views, no empty tables, the reason said once.
    expect(await page.locator('#nav').count()).toBe(0);
    expect(await page.locator('table').count()).toBe(0);
    expect(await page.getByText('this punctual needs its API token').count()).toBe(1);
    await page.getByLabel('API token').fill('not-the-token-0123456789');
    await page.getByRole('button', { name: 'Use' }).click();
    await page.locator('#token-message', { hasText: 'not known here' }).waitFor();
    expect(await page.getByText('not known here').count()).toBe(1);
    await shot(page, layout, 'login');
    await page.getByLabel('API token').fill(ADMIN);
    await page.getByRole('button', { name: 'Use' }).click();
    await page.locator('#task-title', { hasText: `Task ${id}` }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/console/task/${id}`);
    await page.context().close();
  });

  it('opens every view by its own address, and moves between them by the header and the back button', async () => {
    const [bad] = await failed(1, [`views:${layout.name}`]);
    const page = await open(layout, '/console');
    await page.locator('#pending').waitFor();
    await page.locator('#hour-runs', { hasText: /^\d+$/ }).waitFor();
    expect(await fitsWidth(page)).toBe(true);
    await shot(page, layout, 'overview');

    for (const [path, ready, name] of [
      ['/console/tasks/failed', `#tasks tbody tr[data-id="${bad}"]`, 'tasks'],
      [`/console/task/${bad}`, '#task-runs tbody tr[data-run]', 'task'],
      ['/console/types', '#task-types tbody tr[data-type="flaky"]', 'types'],
      ['/console/types/flaky', '#type-fields', 'type'],
      ['/console/audit', '#audit-entries', 'audit'],
      ['/console/workers', '#worker-types', 'workers'],
    ] as const) {
      await page.goto(`${baseUrl}${path}`);
      await page.locator(ready).first().waitFor();
      expect(await fitsWidth(page), `${path} fits ${layout.width} px`).toBe(true);
      await shot(page, layout, name);
    }
    // The header's links and the back button.
    await page.locator('#nav').getByRole('link', { name: 'Tasks', exact: true }).click();
    await page.locator('#views a[aria-current="page"]', { hasText: 'Pending' }).waitFor();
    await page
      .locator('#views')
      .getByRole('link', { name: /^Failed/ })
      .click();
    await page.locator(`#tasks tbody tr[data-id="${bad}"]`).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/tasks/failed');
    await page.goBack();
    await page.locator('#views a[aria-current="page"]', { hasText: 'Pending' }).waitFor();
    await page.goBack();
    await page.locator('#worker-types').waitFor();
    await page.context().close();
  });

  it("finds an order's task by its key in one search and runs it now", async () => {
    const key = `close_order:SN-${layout.name}-4711`;
    const id = await create({ type: 'closes', payload: { orderSn: 'SN4711' }, delayMs: HOUR, key });
    const page = await open(layout, '/console');
    await page.getByLabel('Search tasks').fill(key);
    await page.getByRole('button', { name: 'Find' }).click();
    await page.locator('#task-title', { hasText: `Task ${id}` }).waitFor();
    await page.locator('#task-actions').getByRole('button', { name: 'Run now' }).click();
    expect(await page.locator('#confirm-text').textContent()).toContain(key);
    await confirm(page, 'Run it now');
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [id])) === 1);
    await page.locator('#task-fields [data-field="status"] dd', { hasText: 'done' }).waitFor();
    await page.locator('#task-runs tbody tr[data-run] td', { hasText: 'done' }).first().waitFor();
    // What the handler answered, on the task and on its run.
    expect(await page.locator('#task-fields [data-field="result"] dd').textContent()).toBe('closed');
    expect(await page.locator('#task-runs tbody tr[data-run] td.result').first().textContent()).toBe('closed');
    await page.context().close();
  });

  it('reschedules a pending task to a time in a zone', async () => {
    const id = await create({ type: 'quiet', payload: { orderSn: 'R1' }, delayMs: HOUR });
    const page = await open(layout, `/console/task/${id}`);
    await page.locator('#task-actions').getByRole('button', { name: 'Reschedule' }).click();
    await page.getByLabel('New time').fill('2031-03-04T05:06:07');
    await page.getByLabel('in zone').fill('Asia/Shanghai');
    await page.getByRole('button', { name: 'Move it' }).click();
    await confirm(page, 'Reschedule the task');
    await page.locator('#task-fields [data-field="runAt"] dd', { hasText: '2031-03-04 05:06:07 Asia/Shanghai' }).waitFor();
    const [row] = await db.query<any[]>(
      "SELECT DATE_FORMAT(run_at, '%Y-%m-%d %H:%i:%s') AS at, timezone FROM punctual_tasks WHERE id = ?",
      [id],
    );
    expect(row).toEqual({ at: '2031-03-03 21:06:07', timezone: 'Asia/Shanghai' });
    await page.context().close();
  });

  it("edits a pending task's payload, and says so when the text is not JSON", async () => {
    const id = await create({ type: 'quiet', payload: { orderSn: 'OLD' }, delayMs: HOUR });
    const page = await open(layout, `/console/task/${id}`);
    await page.getByRole('button', { name: 'Edit payload' }).click();
    await page.getByLabel('New payload (JSON)').fill('{ not json');
    await page.getByRole('button', { name: 'Save payload' }).click();
    await page.locator('#payload-form [role=alert]', { hasText: 'not JSON' }).waitFor();
    await page.getByLabel('New payload (JSON)').fill('{"orderSn": "NEW", "note": "<b>not markup</b>"}');
    await page.getByRole('button', { name: 'Save payload' }).click();
    await confirm(page, 'Replace the payload');
    await page.locator('#task-payload', { hasText: 'NEW' }).waitFor();
    // Shown as text: the markup a shop sent is not markup in the page.
    expect(await page.locator('#task-payload b').count()).toBe(0);
    const stored = (await db.query<any[]>('SELECT payload FROM punctual_tasks WHERE id = ?', [id]))[0].payload;
    expect(typeof stored === 'string' ? JSON.parse(stored) : stored).toEqual({
      orderSn: 'NEW',
      note: '<b>not markup</b>',
    });
    await page.context().close();
  });

  it('deletes a task after a confirmation, and a selection of failed ones', async () => {
    const [one, ...more] = await failed(3, [`delete:${layout.name}`]);
    const page = await open(layout, `/console/task/${one}`);
    await page.locator('#task-actions').getByRole('button', { name: 'Delete' }).click();
    await confirm(page, 'Delete the task');
    await waitFor(async () => (await count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ?', [one])) === 0);
    await page.locator('#views a[aria-current="page"]', { hasText: 'Failed' }).waitFor();

    await page.goto(`${baseUrl}/console/tasks/failed?tag=delete:${layout.name}`);
    for (const id of more) await page.getByRole('checkbox', { name: `select task ${id}`, exact: true }).check();
    await page.getByRole('button', { name: 'Delete selected (2)' }).click();
    await confirm(page, 'Delete 2 tasks');
    await page.locator('#status', { hasText: '2 of 2 tasks deleted' }).waitFor();
    expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?)', [more])).toBe(0);
    await page.context().close();
  });

  it('retries all failed tasks of a type from its page, and deletes all failed of a type', async () => {
    recovered = false;
    const type = 'flaky';
    await db.execute("DELETE FROM punctual_tasks WHERE type = 'flaky'");
    const ids = await failed(2);
    const page = await open(layout, `/console/types/${type}`);
    await page.getByRole('button', { name: 'Retry all 2 failed' }).click();
    recovered = true;
    await confirm(page, 'Retry them all');
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [ids])) === 2);

    recovered = false;
    const again = await failed(2);
    await page.getByRole('button', { name: 'Delete all 2 failed' }).click();
    await confirm(page, 'Delete all 2');
    await waitFor(async () => (await count('SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?)', [again])) === 0);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [ids])).toBe(2);
    await page.context().close();
  });

  it('runs one row now, then every pending task of a tag now, from the list', async () => {
    const tag = `run:${layout.name}`;
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push(await create({ type: 'quiet', payload: { i }, delayMs: HOUR + i * 1000, tags: [tag] }));
    const page = await open(layout, `/console/tasks/pending?tag=${tag}`);
    await page.locator(`#tasks tbody tr[data-id="${ids[0]}"]`).getByRole('button', { name: 'Run now' }).click();
    await confirm(page, 'Run it now');
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id = ? AND status = 'done'", [ids[0]])) === 1);
    await page.locator(`#tasks tbody tr[data-id="${ids[0]}"]`).waitFor({ state: 'detached' });
    // The count a confirmation gives is the view's (counts are shared a second or two): once it says 2.
    await page.locator('#page-info', { hasText: '1–2 of 2 ' }).waitFor();
    await page.getByRole('button', { name: `Run all pending with tag ${tag} now` }).click();
    expect(await page.locator('#confirm-text').textContent()).toContain('(2 now)');
    await confirm(page, 'Run them all now');
    await waitFor(async () => (await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status = 'done'", [ids])) === 3);
    await page.context().close();
  });

  it('moves every pending task of a tag to one time in a zone, from the list', async () => {
    const tag = `move:${layout.name}`;
    const ids: number[] = [];
    for (let i = 0; i < 2; i++) ids.push(await create({ type: 'quiet', payload: { i }, delayMs: HOUR + i * 1000, tags: [tag] }));
    const page = await open(layout, `/console/tasks/pending?tag=${tag}`);
    await page.locator('#page-info', { hasText: '1–2 of 2 ' }).waitFor();
    await page.getByLabel(`Move all pending with tag ${tag} to`).fill('2032-02-03T04:05:06');
    await page.locator('#move-all').getByLabel('in zone').fill('Europe/Berlin');
    await page.getByRole('button', { name: 'Move them' }).click();
    expect(await page.locator('#confirm-text').textContent()).toContain('(2 now) to 2032-02-03 04:05:06 Europe/Berlin');
    await confirm(page, 'Move them all');
    await page.locator('#status', { hasText: '2 of 2 tasks moved' }).waitFor();
    const rows = await db.query<any[]>(
      "SELECT DATE_FORMAT(run_at, '%Y-%m-%d %H:%i:%s') AS at, timezone FROM punctual_tasks WHERE id IN (?)",
      [ids],
    );
    expect(rows).toEqual([
      { at: '2032-02-03 03:05:06', timezone: 'Europe/Berlin' },
      { at: '2032-02-03 03:05:06', timezone: 'Europe/Berlin' },
    ]);
    await page.context().close();
  });

  it("sets a type's limits for the whole fleet from its page", async () => {
    const page = await open(layout, '/console/types/quiet');
    await page.getByLabel('At once (empty: no limit)').fill('3');
    await page.getByLabel('Per second (empty: no limit)').fill('7.5');
    await page.getByRole('button', { name: 'Set limits' }).click();
    await confirm(page, 'Set the limits');
    await page.locator('#type-fields [data-field="limits"] dd', { hasText: '3 at once, 7.5/s' }).waitFor();
    const [row] = await db.query<any[]>("SELECT max_concurrency, rate_per_second FROM punctual_type_controls WHERE type = 'quiet'");
    expect([Number(row.max_concurrency), Number(row.rate_per_second)]).toEqual([3, 7.5]);
    // Cleared again: the other tests' runs are not held back.
    await page.getByLabel('At once (empty: no limit)').fill('');
    await page.getByLabel('Per second (empty: no limit)').fill('');
    await page.getByRole('button', { name: 'Set limits' }).click();
    await confirm(page, 'Set the limits');
    await page.locator('#type-fields [data-field="limits"] dd', { hasText: 'none' }).waitFor();
    await page.context().close();
  });

  it('filters by group and by when the tasks are due, in the address', async () => {
    const group = `grp-${layout.name}`;
    const ids: number[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(await create({ type: 'quiet', payload: { i }, runAt: Date.parse('2031-06-01T00:00:00Z') + i * 86_400_000, group }));
    const page = await open(layout, '/console/tasks/pending');
    await page.getByLabel('Group', { exact: true }).fill(group);
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
    await page.locator('#page-info', { hasText: '1–3 of 3 ' }).waitFor();
    // The time range in the address, as a link to share would carry it.
    await page.goto(`${baseUrl}/console/tasks/pending?group=${group}&dueFrom=2031-06-02T00:00:00Z&dueUntil=2031-06-03T00:00:00Z`);
    await page.locator('#page-info', { hasText: '1–1 of 1 ' }).waitFor();
    expect(await page.locator('#tasks tbody tr[data-id]').getAttribute('data-id')).toBe(String(ids[1]));
    expect(await page.locator('#view-note').textContent()).toContain('due from 2031-06-02 00:00:00Z');
    await page.context().close();
  });

  it("shows a recurring task's series, with links to its occurrences", async () => {
    const first = await create({ type: 'quiet', payload: {}, cron: '0 0 * * *', timezone: 'Asia/Shanghai' });
    await db.execute(
      "INSERT INTO punctual_tasks (type, payload, run_at, status, cron, timezone, series_id, finished_at) VALUES ('quiet', '{}', UTC_TIMESTAMP(3) - INTERVAL 1 DAY, 'done', '0 0 * * *', 'Asia/Shanghai', ?, UTC_TIMESTAMP(3))",
      [first],
    );
    const page = await open(layout, `/console/task/${first}`);
    await page.locator('#task-series', { hasText: '0 0 * * * (Asia/Shanghai)' }).waitFor();
    await page.locator('#task-series').getByRole('link', { name: 'done 1' }).click();
    await page.locator('#page-info', { hasText: '1–1 of 1 ' }).waitFor();
    expect(await page.locator('#view-note').textContent()).toContain(`the series of task ${first}`);
    await page.context().close();
  });

  it('shows no action to a read token', async () => {
    const id = await create({ type: 'quiet', payload: { orderSn: 'RO' }, delayMs: HOUR });
    const page = await open(layout, `/console/task/${id}`, READ);
    await page.locator('#task-fields').waitFor();
    expect(await page.locator('#task-page button').allTextContents()).toEqual(['Back to the list']);
    await page.context().close();
  });
});

describe('the last hour on the overview', () => {
  it('counts every run from the run history, so a restart does not change it', async () => {
    // The rows of the hour's runs, and its successful runs on record in their tasks' rows.
    const inTable =
      (await count('SELECT COUNT(*) AS n FROM punctual_task_runs WHERE finished_at >= UTC_TIMESTAMP(3) - INTERVAL 1 HOUR')) +
      (await count(
        "SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND done_by IS NOT NULL AND finished_at >= UTC_TIMESTAMP(3) - INTERVAL 1 HOUR",
      ));
    expect(inTable).toBeGreaterThan(0);
    const page = await open(LAYOUTS[1], '/console');
    // A reading is shared for a few seconds: the next one has the table's count.
    await page.locator('#hour-runs', { hasText: new RegExp(`^${inTable}$`) }).waitFor();
    const runs = inTable;
    await page.context().close();

    await service.stop();
    service = await startTestService(db, ENV, { handlers: handlers() });
    baseUrl = await service.start();
    const after = await open(LAYOUTS[1], '/console');
    await after.locator('#hour-runs', { hasText: String(runs) }).waitFor();
    await after.context().close();
  });
});
