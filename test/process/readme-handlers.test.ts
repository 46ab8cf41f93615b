/**
 * The README's own examples of a shop's handlers run as written: its handler module (written to a
 * folder outside the repository) with its `HANDLERS=` line, its stored procedure with its
 * `PROCEDURES=` line, and docs/handlers.md's close_order written as a procedure on the seeds'
 * tables. Only the schema name `shop` becomes the test's own, and the GRANTs (for a deployment's
 * user; the test's root needs none) are left out.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../src/db/connection.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor, type ServerProcess } from '../helpers/server.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The fenced blocks of a Markdown file, with their language. */
function blocks(markdown: string): { lang: string; text: string }[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((match) => ({ lang: match[1]!, text: match[2]! }));
}

function block(markdown: string, lang: string, ...contains: string[]): string {
  const found = blocks(markdown).filter((b) => b.lang === lang && contains.every((text) => b.text.includes(text)));
  expect(found, `one ${lang} block with ${contains.join(' and ')}`).toHaveLength(1);
  return found[0]!.text;
}

/** The statements of a `DELIMITER //` script, GRANTs left out. */
function statements(script: string, schema: string): string[] {
  return script
    .split('\n')
    .filter((line) => !/^DELIMITER\b/.test(line) && !/^GRANT\b/.test(line))
    .join('\n')
    .split('//')
    .map((statement) => statement.trim())
    .filter((statement) => statement !== '')
    .map((statement) => statement.replace(/\bshop\./g, `\`${schema}\`.`));
}

/** `NAME=value` from the sh block that sets NAME. */
function setting(markdown: string, name: string, contains: string): string {
  const line = block(markdown, 'sh', `${name}=`, contains)
    .split('\n')
    .find((l) => l.startsWith(`${name}=`) && l.includes(contains));
  return /^\w+=(\S+)/.exec(line!)![1]!;
}

const README = read('README.md');
const HANDLERS_DOC = read('docs/handlers.md');

let db: TestDatabase;
let shop: TestDatabase;
let dir: string;
let server: ServerProcess;

beforeAll(async () => {
  db = await createTestDatabase('readme_handlers');
  shop = await createTestDatabase('readme_shop', { create: false });
  await ensureDatabase(shop.url, shop.name);
  await shop.execute("CREATE TABLE memberships (user_id INT PRIMARY KEY, level VARCHAR(16) NOT NULL DEFAULT 'gold')");
  await shop.execute('INSERT INTO memberships (user_id) VALUES (41), (42)');
  await shop.execute("CREATE TABLE coupons (id BIGINT UNSIGNED PRIMARY KEY, state VARCHAR(16) NOT NULL DEFAULT 'active')");
  await shop.execute('INSERT INTO coupons (id) VALUES (7), (8)');
  await shop.execute('CREATE TABLE goods (id BIGINT UNSIGNED PRIMARY KEY, stock INT NOT NULL)');
  await shop.execute(
    "CREATE TABLE orders (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL UNIQUE, status VARCHAR(16) NOT NULL DEFAULT 'unpaid', items JSON NOT NULL, closed_at DATETIME(3) NULL)",
  );
  await shop.execute('INSERT INTO goods VALUES (1, 10), (2, 10)');
  await shop.execute('INSERT INTO orders (order_sn, status, items) VALUES ?', [
    [
      [
        'SN1',
        'unpaid',
        JSON.stringify([
          { goods_id: 2, num: 3 },
          { goods_id: 1, num: 1 },
          { goods_id: 2, num: 1 },
        ]),
      ],
      ['SN2', 'paid', JSON.stringify([{ goods_id: 1, num: 5 }])],
    ],
  ]);
  for (const statement of statements(block(README, 'sql', 'CREATE PROCEDURE shop.expire_coupon'), shop.name)) await shop.execute(statement);
  for (const statement of statements(block(HANDLERS_DOC, 'sql', 'CREATE PROCEDURE shop.close_order_proc'), shop.name))
    await shop.execute(statement);

  dir = mkdtempSync(join(tmpdir(), 'punctual-readme-handlers-'));
  const source = block(README, 'js', '// reset-membership.mjs');
  writeFileSync(join(dir, 'reset-membership.mjs'), source.replace(/\bshop\./g, `\`${shop.name}\`.`));
  const handlers = setting(README, 'HANDLERS', 'reset-membership').replace('$PWD', dir);
  const procedures = [setting(README, 'PROCEDURES', 'expire_coupon'), setting(HANDLERS_DOC, 'PROCEDURES', 'close_order_proc')]
    .join(',')
    .replace(/=shop\./g, `=${shop.name}.`);
  server = await startServer({ env: { DATABASE_URL: db.url, HANDLERS: handlers, PROCEDURES: procedures } });
});

afterAll(async () => {
  await server?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  await shop?.drop();
  await db?.drop();
});

async function run(type: string, payload: unknown): Promise<{ status: string; lastError: string | null }> {
  const created = await server.request('POST', '/tasks', { type, payload, delayMs: 0 });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return waitFor(
    async () => {
      const { body } = await server.request('GET', `/tasks/${created.body.id}`);
      return ['done', 'failed'].includes(body.status) ? body : undefined;
    },
    10_000,
    `the ${type} task to finish`,
  );
}

describe("the README's own handler examples", () => {
  it('the module resets one membership, and refuses a bad payload', async () => {
    expect((await run('reset_membership', { userId: 42 })).status).toBe('done');
    expect(await shop.query<any[]>('SELECT user_id, level FROM memberships ORDER BY user_id')).toEqual([
      { user_id: 41, level: 'gold' },
      { user_id: 42, level: 'basic' },
    ]);
    const bad = await server.request('POST', '/tasks', { type: 'reset_membership', payload: { userId: 0 }, delayMs: 0 });
    expect([bad.status, bad.body.message]).toEqual([400, 'body/payload/userId must be >= 1']);
  });

  it('the procedure expires a coupon, and fails for good on a missing one', async () => {
    expect((await run('expire_coupon', { p_coupon_id: 7 })).status).toBe('done');
    expect(await shop.query<any[]>('SELECT id, state FROM coupons ORDER BY id')).toEqual([
      { id: 7, state: 'expired' },
      { id: 8, state: 'active' },
    ]);
    const missing = await run('expire_coupon', { p_coupon_id: 999 });
    expect([missing.status, missing.lastError]).toEqual(['failed', 'no such coupon']);
  });

  it("docs/handlers.md's close_order procedure closes an unpaid order once and leaves a paid one", async () => {
    expect((await run('close_order_sql', { p_order_sn: 'SN1' })).status).toBe('done');
    expect((await run('close_order_sql', { p_order_sn: 'SN1' })).status).toBe('done'); // closed already: nothing more
    expect((await run('close_order_sql', { p_order_sn: 'SN2' })).status).toBe('done');
    expect((await run('close_order_sql', { p_order_sn: 'NO-SUCH' })).status).toBe('done');
    expect(await shop.query<any[]>('SELECT order_sn, status FROM orders ORDER BY order_sn')).toEqual([
      { order_sn: 'SN1', status: 'closed' },
      { order_sn: 'SN2', status: 'paid' },
    ]);
    expect(await shop.query<any[]>('SELECT id, stock FROM goods ORDER BY id')).toEqual([
      { id: 1, stock: 11 },
      { id: 2, stock: 14 },
    ]);
  });
});
