/**
 * What a shop gets from `npm pack`: the tarball installs into an empty folder (and globally, into
 * a prefix of the test's own), and then runs with nothing else from this checkout: `punctual
 * --version`, `--help`, `migrate` and `doctor` against a database, `punctual start` serving a task
 * that runs, and the library entry imported by plain Node and type-checked by tsc. The package
 * holds what it needs and nothing else: no tests, no bench, no sources.
 *
 * Slow on purpose: it installs the package's dependencies from the registry, as a shop would.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../helpers/handler-package.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startServer, waitFor } from '../helpers/server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

let work: string;
let tarball: string;
let packed: { files: { path: string }[]; size: number; unpackedSize: number };
let db: TestDatabase;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'punctual-package-'));
  // dist/ is built already (the global setup): packed as it is, the way `npm pack`'s prepack builds it.
  const [info] = JSON.parse(
    await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], ROOT),
  ) as (typeof packed & {
    filename: string;
  })[];
  packed = info!;
  tarball = join(work, info!.filename);
  db = await createTestDatabase('service_package', { create: false });
}, 120_000);

afterAll(async () => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
  await db?.drop();
});

describe('the punctual package', () => {
  it('holds the built service, its migrations and its command, and no tests, bench or sources', () => {
    const paths = packed.files.map((file) => file.path);
    console.log(
      `punctual-${VERSION}.tgz: ${paths.length} files, ${(packed.size / 1024).toFixed(0)} KB packed, ${(packed.unpackedSize / 1024).toFixed(0)} KB unpacked`,
    );
    for (const needed of [
      'bin/punctual.mjs',
      'dist/app/main.js',
      'dist/app/library.js',
      'dist/app/library.d.ts',
      'drizzle/meta/_journal.json',
      'package.json',
      'README.md',
      'CHANGELOG.md',
      'LICENSE',
    ])
      expect(paths).toContain(needed);
    expect(paths.some((path) => path.startsWith('drizzle/') && path.endsWith('.sql'))).toBe(true);
    expect(paths.filter((path) => /^(test|src|clients|docs|ops|\.ci)\//.test(path) || /\.test\.|bench/.test(path))).toEqual([]);
  });

  it('installs into an empty folder and runs from there: --version, --help, migrate, doctor, start, the library', async () => {
    const shop = join(work, 'shop');
    await run('mkdir', ['-p', shop], work);
    writeFileSync(join(shop, 'package.json'), JSON.stringify({ name: 'a-shop', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], shop);
    const bin = join(shop, 'node_modules', '.bin', 'punctual');
    expect((await run(bin, ['--version'], shop)).trim()).toBe(VERSION);
    expect(await run(bin, ['--help'], shop)).toMatch(/migrate/);
    const env = { DATABASE_URL: db.url };
    await run(bin, ['migrate'], shop, env);
    const [tables] = await db.query<any[]>('SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?', [db.name]);
    expect(Number(tables.n)).toBeGreaterThan(3);
    expect(await run(bin, ['doctor'], shop, env)).toMatch(/database: answers/);

    // The installed command serves: a task created through it is there, pending.
    const server = await startServer({ env, main: join(shop, 'node_modules', 'punctual', 'bin', 'punctual.mjs') });
    try {
      const created = await server.request('POST', '/tasks', {
        type: 'close_order',
        payload: { orderSn: 'SN-PACKAGE-1' },
        delayMs: 600_000,
      });
      expect(created.status).toBe(201);
      expect((await server.request('GET', '/tasks/pending')).body.tasks.map((task: { id: number }) => task.id)).toContain(created.body.id);
      await waitFor(async () => (await server.request('GET', '/readyz')).status === 200, 10_000, 'ready');
    } finally {
      expect(await server.stop('SIGTERM')).toBe(0);
    }

    // The library entry, from plain Node and under tsc --strict.
    writeFileSync(
      join(shop, 'library.mjs'),
      "import { createPunctual, defineHandler } from 'punctual';\nconsole.log(typeof createPunctual, typeof defineHandler);\n",
    );
    expect((await run(process.execPath, ['library.mjs'], shop)).trim()).toBe('function function');
    writeFileSync(
      join(shop, 'host.ts'),
      [
        "import { createPunctual, defineHandler, type Punctual } from 'punctual';",
        "const ping = defineHandler({ type: 'ping', effect: 'database', payload: { type: 'object' }, async run() { return 'ok'; } });",
        "const service: Punctual = createPunctual({ DATABASE_URL: 'mysql://root@127.0.0.1:3306/shop', PORT: 0, handlers: [ping] });",
        'export const url: string | undefined = service.url;',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(shop, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          noEmit: true,
          skipLibCheck: true,
        },
        files: ['host.ts'],
      }),
    );
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], shop);
  }, 300_000);

  it('comes with a systemd unit that systemd-analyze verifies', async () => {
    // It exits 0 on an unknown key or a bad value too, saying so on stderr: nothing may be said.
    const { stderr } = await promisify(execFile)('systemd-analyze', ['verify', join(ROOT, 'ops', 'punctual.service')]);
    expect(stderr).toBe('');
  });

  it('installs globally (into a prefix of its own) and answers as a command on the PATH', async () => {
    const prefix = join(work, 'global');
    await run('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline', tarball], work);
    expect((await run(join(prefix, 'bin', 'punctual'), ['--version'], work)).trim()).toBe(VERSION);
  }, 300_000);
});
