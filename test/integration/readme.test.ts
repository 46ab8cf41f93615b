/**
 * The examples of the README and docs/ stay in step with the API: every route a curl example
 * calls is in the OpenAPI document, and every PHP client method an example calls exists. (The
 * settings are checked against docs/configuration.md, generated from the code:
 * test/unit/config-docs.test.ts.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
/** The README and every topic file of docs/, where the examples now live. */
const docs = [
  'README.md',
  ...readdirSync(new URL('../../docs/', import.meta.url))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
]
  .map(read)
  .join('\n');
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

describe('the README and docs/', () => {
  it('calls only documented routes in its curl examples', () => {
    const calls = [...docs.matchAll(/curl[^\n]*?(?:-X (\w+) )?[^\n]*?localhost:3000(\/[^\s'"?]*)/g)].map(([line, method, path]) => [
      (method ?? /-X (\w+)/.exec(line)?.[1] ?? 'GET').toLowerCase(),
      path!.replace(/\$\w+/g, 'x'),
    ]);
    expect(calls.length).toBeGreaterThanOrEqual(8);
    for (const [method, path] of calls) expect(documented(method!, path!), `${method} ${path}`).toBe(true);
  });

  it('calls only methods the PHP client has, here and in its own README', () => {
    const client = readFileSync(new URL('../../clients/php/src/Client.php', import.meta.url), 'utf8');
    const methods = new Set([...client.matchAll(/public function (\w+)\(/g)].map(([, name]) => name!));
    const phpReadme = readFileSync(new URL('../../clients/php/README.md', import.meta.url), 'utf8');
    const calls = [...`${docs}\n${phpReadme}`.matchAll(/\$punctual->(\w+)\(/g)].map(([, name]) => name!);
    expect(calls.length).toBeGreaterThanOrEqual(10);
    for (const name of calls) expect(methods, name).toContain(name);
  });
});
