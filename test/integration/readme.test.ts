/**
 * The README's examples stay in step with the API: every route a curl or PHP example calls is in
 * the OpenAPI document, and every setting the service reads is in the configuration table.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
let db: TestDatabase;
let service: TestService;
let paths: Record<string, Record<string, unknown>>;

beforeAll(async () => {
  db = await createTestDatabase('readme');
  service = await startTestService(db);
  paths = (await service.app.inject({ url: '/openapi.json' })).json().paths;
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

/** Does the document have `method path`, with `{param}` standing for any one segment? */
function documented(method: string, path: string): boolean {
  return Object.entries(paths).some(
    ([template, operations]) => method in operations && new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path),
  );
}

describe('the README', () => {
  it('calls only documented routes in its curl examples', () => {
    const calls = [...readme.matchAll(/curl[^\n]*?(?:-X (\w+) )?[^\n]*?localhost:3000(\/[^\s'"?]*)/g)].map(([line, method, path]) => [
      (method ?? /-X (\w+)/.exec(line)?.[1] ?? 'GET').toLowerCase(),
      path!.replace(/\$\w+/g, 'x'),
    ]);
    expect(calls.length).toBeGreaterThanOrEqual(8);
    for (const [method, path] of calls) expect(documented(method!, path!), `${method} ${path}`).toBe(true);
  });

  it('calls only documented routes in its PHP client', () => {
    const calls = [...readme.matchAll(/\$this->call\('(\w+)', '([^']+)'/g)].map(([, method, path]) => [method!.toLowerCase(), `${path}`]);
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const [method, path] of calls) {
      const concrete = path!.endsWith('/') ? `${path}close_order%3ASN1/cancel` : path!;
      expect(documented(method!, concrete), `${method} ${path}`).toBe(true);
    }
  });

  it('lists every setting the service reads', () => {
    const source = readFileSync(new URL('../../src/config.ts', import.meta.url), 'utf8');
    const settings = new Set([...source.matchAll(/(?:integer|text)\(env, '([A-Z_]+)'/g)].map(([, name]) => name!));
    expect(settings.size).toBeGreaterThan(15);
    for (const name of settings) expect(readme, name).toContain(`| \`${name}\` |`);
  });
});
