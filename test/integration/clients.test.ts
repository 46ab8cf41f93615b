/**
 * The TypeScript client (clients/ts/src/client.ts) and the PHP client (clients/php/src/Client.php) call the
 * same routes, and together every route of the OpenAPI document but the document itself, its
 * pages and the dashboard with its chart data: a route added to the API without a method in both clients fails here.
 * The routes are read from the clients' source, where each call names its method and path.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

/** Routes that are for people or tools, not for a client library. */
const NOT_FOR_CLIENTS = /^\/(openapi\.json|docs|ui|charts|favicon\.ico)?(\/|$)/;

let db: TestDatabase;
let service: TestService;
let documented: string[];

beforeAll(async () => {
  db = await createTestDatabase('clients');
  service = await startTestService(db);
  const paths: Record<string, Record<string, unknown>> = (await service.app.inject({ url: '/openapi.json' })).json().paths;
  documented = Object.entries(paths)
    .filter(([path]) => !NOT_FOR_CLIENTS.test(path))
    .flatMap(([path, operations]) =>
      Object.keys(operations)
        .filter((method) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .map((method) => `${method.toUpperCase()} ${path.replace(/\{[^}]+\}/g, '{}')}`),
    )
    .sort();
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** `this.#call<Task>('POST', \`/tasks/${id}/cancel\`)` → "POST /tasks/{}/cancel". */
function typescriptRoutes(source: string): string[] {
  return [...source.matchAll(/this\.#(?:call|body)(?:<[^>(]*>)?\('(\w+)', [`']([^`']*)[`']/g)].map(
    ([, method, path]) =>
      `${method} ${path!
        .replace(/\$\{(?:search\.size|search)[^]*$/, '')
        .replace(/\$\{[^}]+\}/g, '{}')
        .replace(/\?.*$/, '')}`,
  );
}

/** `$this->call('POST', '/tasks/by-key/' . rawurlencode($key) . '/cancel')` → "POST /tasks/by-key/{}/cancel". */
function phpRoutes(source: string): string[] {
  return [...source.matchAll(/\$this->call\('(\w+)', ((?:\s*\.\s*|'[^']*'|"[^"]*"|rawurlencode\(\$\w+\))+)/g)].map(
    ([, method, expression]) => {
      const path = expression!
        .replace(/rawurlencode\(\$\w+\)/g, '{}')
        .replace(/\s*\.\s*/g, '')
        .replace(/['"]/g, '')
        .replace(/\{\$query\}|\?.*$/g, '')
        .replace(/\{\$\w+\}/g, '{}');
      return `${method} ${path}`;
    },
  );
}

describe('the clients', () => {
  const ts = [...new Set(typescriptRoutes(read('clients/ts/src/client.ts')))].sort();
  const php = [...new Set(phpRoutes(read('clients/php/src/Client.php')))].sort();

  it('read the routes from both sources', () => {
    expect(ts.length).toBeGreaterThan(10);
    expect(php.length).toBeGreaterThan(10);
  });

  it('call the same routes, in TypeScript and in PHP', () => {
    expect(php).toEqual(ts);
  });

  it('call every route of the API meant for programs', () => {
    expect(documented.length).toBeGreaterThan(10);
    expect(ts).toEqual(documented);
    expect(php).toEqual(documented);
  });
});
