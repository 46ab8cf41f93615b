/**
 * The built server serves the dashboard from its own dist/ (the build copies the page there) and
 * uPlot from the installed package: the running service reads nothing from src/. Checked by
 * starting dist/app/main.js with src/ out of its way: a copy of dist/ alone, next to node_modules.
 */
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { type ServerProcess, startServer } from '../helpers/server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let db: TestDatabase;
let server: ServerProcess | undefined;
let packageDir: string;

beforeAll(async () => {
  db = await createTestDatabase('dashboard_files');
  // The package as installed: dist/, drizzle/, package.json and its dependencies, no src/.
  packageDir = mkdtempSync(join(tmpdir(), 'punctual-package-'));
  cpSync(join(ROOT, 'dist'), join(packageDir, 'dist'), { recursive: true });
  cpSync(join(ROOT, 'drizzle'), join(packageDir, 'drizzle'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(packageDir, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(packageDir, 'node_modules'));
  writeFileSync(join(packageDir, 'README.md'), 'a copy of the built package, for a test\n');
});

afterAll(async () => {
  await server?.stop();
  await db?.drop();
  rmSync(packageDir, { recursive: true, force: true });
});

describe('the built package', () => {
  it('serves the dashboard, its charts and uPlot without src/', async () => {
    server = await startServer({ env: { DATABASE_URL: db.url }, main: join(packageDir, 'dist/app/main.js') });
    for (const [path, type, text] of [
      ['/', 'text/html', 'id="app"'],
      ['/console/task/1', 'text/html', 'src="/ui/app.js"'],
      ['/ui/app.js', 'text/javascript', "from './views/tasks.js'"],
      ['/ui/api.js', 'text/javascript', 'export async function api'],
      ['/ui/views/task.js', 'text/javascript', 'export function TaskPage'],
      ['/ui/vendor/preact.js', 'text/javascript', 'export'],
      ['/ui/vendor/hooks.js', 'text/javascript', 'from"/ui/vendor/preact.js"'],
      ['/ui/vendor/htm.js', 'text/javascript', 'export'],
      ['/ui/charts.js', 'text/javascript', "from '/ui/vendor/uPlot.esm.js'"],
      ['/ui/dashboard.css', 'text/css', '.chart-pair'],
      ['/ui/vendor/uPlot.esm.js', 'text/javascript', 'export { uPlot as default }'],
      ['/ui/vendor/uPlot.min.css', 'text/css', '.uplot'],
    ] as const) {
      const response = await fetch(`${server.baseUrl}${path}`);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type'), path).toContain(type);
      expect(await response.text(), path).toContain(text);
    }
  });
});
