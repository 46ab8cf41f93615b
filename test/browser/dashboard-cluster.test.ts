/**
 * The dashboard with several instances (SHARDING=on), in a real browser: it lists the processes
 * sharing the tasks and how many shards each holds; with SHARDING=off the list stays hidden.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { launchBrowser } from '../helpers/browser.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
const services: TestService[] = [];
let browser: Browser;

beforeAll(async () => {
  db = await createTestDatabase('dashboard_cluster');
  browser = await launchBrowser();
}, 15 * 60_000);

afterAll(async () => {
  await browser?.close();
  for (const service of services) await service.stop();
  await db?.drop();
});

async function start(env: Record<string, string>): Promise<{ service: TestService; url: string }> {
  const service = await startTestService(db, { PORT: '0', LEASE_MS: '1500', ...env }, { boot: false });
  services.push(service);
  return { service, url: await service.start() };
}

describe('the dashboard of several instances', () => {
  it('lists the processes and their shard counts, and this one among them', async () => {
    const first = await start({ SHARDING: 'on' });
    const second = await start({ SHARDING: 'on' });
    await waitFor(
      // Both hold some: the first holds all 256 alone until the second takes its share.
      async () =>
        first.service.keeper!.shardsOwned > 0 &&
        second.service.keeper!.shardsOwned > 0 &&
        first.service.keeper!.shardsOwned + second.service.keeper!.shardsOwned === 256,
      15_000,
      'the shards to be shared',
    );
    const page = await browser.newPage();
    await page.goto(first.url);
    await page.waitForSelector('#cluster:not([hidden]) #cluster-members tbody tr + tr', { timeout: 10_000 });
    // The page refreshes every 2 s: wait for a refresh that shows the settled counts.
    const rows = await waitFor(
      async () => {
        const read = await page.$$eval('#cluster-members tbody tr', (trs) =>
          trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
        );
        const held = read.map((row) => Number(row[1]));
        return held.length === 2 && held.every((n) => n > 0) && held[0]! + held[1]! === 256 ? read : undefined;
      },
      10_000,
      'the page to show every shard held',
    );
    const byId = new Map(rows.map((row) => [row[0]!.replace(' (this one)', ''), row]));
    expect(Number(byId.get(first.service.owner)![1])).toBe(first.service.keeper!.shardsOwned);
    expect(Number(byId.get(second.service.owner)![1])).toBe(second.service.keeper!.shardsOwned);
    expect(byId.get(first.service.owner)![0]).toContain('(this one)');
    expect(await page.textContent('#cluster-note')).toContain('256 shards');
    await page.close();
  });

  it('hides the list when the process does not shard', async () => {
    const plain = await start({ SHARDING: 'off' });
    const page = await browser.newPage();
    await page.goto(plain.url);
    await page.waitForSelector('#status:has-text("updated")', { timeout: 10_000 }); // a refresh went through
    expect(await page.$eval('#cluster', (section) => section.hasAttribute('hidden'))).toBe(true);
    await page.close();
  });
});
