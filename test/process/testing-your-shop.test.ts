/**
 * docs/testing-your-shop.md runs as written: its TypeScript example (Node's test runner) against a
 * punctual started with `start --test-clock` on a shop database of its own, with the client from
 * this tree for `@punctual/client`; its PHP example is clients/php/tests/ShopFlowsTest.php word for
 * word (that file runs in `npm run test:php`).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, type ServerProcess } from '../helpers/server.js';
import { createShop } from '../helpers/shop.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 60_000 });

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/testing-your-shop.md'), 'utf8');
const CLIENT = join(ROOT, 'clients/ts/src/client.ts');

/** The first ```language block after `heading`. */
function block(heading: string, language: string): string {
  const after = DOC.slice(DOC.indexOf(`${heading}\n`));
  const start = after.indexOf(`\`\`\`${language}\n`) + language.length + 4;
  return after.slice(start, after.indexOf('\n```', start) + 1);
}

describe('docs/testing-your-shop.md', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase('shop_flows_doc');
    await createShop(db);
    server = await startServer({
      main: join(ROOT, 'bin/punctual.mjs'),
      args: ['start', '--test-clock'],
      env: { DATABASE_URL: db.url, WORKER_TYPES: 'flash_sale' },
    });
    // Inside the tree, so mysql2 and the client's typebox resolve from its node_modules.
    dir = mkdtempSync(join(ROOT, 'node_modules/.cache/shop-flows-'));
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('the TypeScript example passes against a service on the test clock', async () => {
    const example = block('## The three flows, in TypeScript', 'ts');
    expect(example).toContain("from '@punctual/client'");
    const file = join(dir, 'shop-flows.test.ts');
    writeFileSync(file, example.replace("from '@punctual/client'", `from '${CLIENT}'`));
    const started = performance.now();
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', file], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', PUNCTUAL_TEST_CLOCK_URL: server.baseUrl, SHOP_DATABASE_URL: db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    const wallMs = performance.now() - started;
    expect(code, output).toBe(0);
    expect(output).toMatch(/pass 3/);
    expect(output).toMatch(/fail 0/);
    console.log(`the TypeScript example's three flows took ${wallMs.toFixed(0)} ms of wall time, tsx start-up included`);
    const [closed] = await db.query<any[]>("SELECT COUNT(*) AS n FROM orders WHERE status = 'closed'");
    expect(closed.n).toBe(1);
  });

  it('the PHP example is the PHP suite’s ShopFlowsTest.php', () => {
    expect(block('## The same flows, in PHP', 'php')).toBe(readFileSync(join(ROOT, 'clients/php/tests/ShopFlowsTest.php'), 'utf8'));
  });
});
