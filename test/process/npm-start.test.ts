/**
 * `npm start` stops the way a supervisor needs it to. systemd, `docker stop` and a container
 * whose CMD is `npm start` send SIGTERM to the one process they started: npm. That must stop the
 * service cleanly, npm must exit 0 within a second, and no node process of the service may be
 * left behind, orphaned and still answering on its port.
 *
 * Also the entry the start runs (bin/punctual.mjs): a dist/ that is missing or older than src/
 * is built before the service starts, and a failed build refuses the start with a clear line.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let db: TestDatabase;
/** Every process a test started, npm and what it ran: killed at the end if a test left one. */
const started = new Set<number>();

beforeAll(async () => {
  db = await createTestDatabase('npmstart');
});

afterAll(async () => {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await db?.drop();
});

/** The processes whose parent is `pid`, and theirs, from /proc. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid …; comm may hold spaces and parentheses.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const visit = (parent: number) => {
    for (const child of children.get(parent) ?? []) {
      found.push(child);
      visit(child);
    }
  };
  visit(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie is dead, only not yet reaped.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** `npm start` with the test's database and any free port, and the address it says it is ready on. */
async function npmStart(): Promise<{ npm: ChildProcess; address: string; exited: Promise<[number | null, string | null]> }> {
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: db.url, PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(npm.pid!);
  const exited = once(npm, 'exit') as Promise<[number | null, string | null]>;
  const output: string[] = [];
  const ready = new Promise<string>((resolve) => {
    createInterface({ input: npm.stdout }).on('line', (line) => {
      output.push(line);
      if (!line.startsWith('{')) return; // npm's own banner
      const entry = JSON.parse(line) as { msg: string; address?: string };
      if (entry.msg === 'punctual is ready') resolve(entry.address!);
    });
  });
  createInterface({ input: npm.stderr }).on('line', (line) => output.push(line));
  const failed = exited.then(([code, signal]) => {
    throw new Error(`npm start ended with ${code ?? signal} before it was ready:\n${output.join('\n')}`);
  });
  const address = await Promise.race([ready, failed]);
  for (const pid of descendants(npm.pid!)) started.add(pid);
  return { npm, address, exited };
}

describe('npm start under a supervisor', () => {
  it('stops cleanly on a SIGTERM to the npm process: exit 0 within a second, no service process left', async () => {
    const { npm, address, exited } = await npmStart();
    expect((await fetch(`${address}/readyz`)).status).toBe(200);
    const service = descendants(npm.pid!);
    expect(service.length).toBeGreaterThan(0);

    const sent = performance.now();
    npm.kill('SIGTERM');
    const [code, signal] = await exited;
    const tookMs = performance.now() - sent;

    // Soft: a failure reports all four, which together tell what went wrong.
    expect.soft({ code, signal }).toEqual({ code: 0, signal: null });
    expect.soft(tookMs).toBeLessThan(1000);
    await waitFor(async () => service.every((pid) => !alive(pid)), 2000, 'the service processes to end').catch(() => undefined);
    expect.soft(service.filter(alive), 'processes npm started, still running').toEqual([]);
    await expect.soft(fetch(`${address}/readyz`).then((response) => response.status)).rejects.toThrow();
  });
});

describe('the entry npm start runs', () => {
  /**
   * A copy of the entry and its build scripts beside a small src/ of its own (a main.js that
   * says it ran), with this checkout's TypeScript and esbuild (the build bundles the entry) linked in, or not.
   */
  function fakePackage(withCompiler: boolean): string {
    const root = mkdtempSync(join(tmpdir(), 'punctual-entry-'));
    cpSync(join(ROOT, 'bin'), join(root, 'bin'), { recursive: true });
    for (const script of ['build.mjs', 'ensure-build.mjs']) cpSync(join(ROOT, 'scripts', script), join(root, 'scripts', script));
    mkdirSync(join(root, 'src', 'app'), { recursive: true });
    mkdirSync(join(root, 'src', 'http', 'dashboard'), { recursive: true });
    writeFileSync(join(root, 'src', 'http', 'dashboard', 'index.html'), '<!doctype html>');
    writeFileSync(join(root, 'src', 'app', 'main.ts'), "console.log('the built service ran');\nexport {};\n");
    writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(
      join(root, 'tsconfig.build.json'),
      JSON.stringify({
        compilerOptions: { module: 'NodeNext', target: 'ES2023', rootDir: 'src', outDir: 'dist', types: [] },
        include: ['src'],
      }),
    );
    if (withCompiler) {
      mkdirSync(join(root, 'node_modules'));
      symlinkSync(join(ROOT, 'node_modules', 'typescript'), join(root, 'node_modules', 'typescript'));
      symlinkSync(join(ROOT, 'node_modules', 'esbuild'), join(root, 'node_modules', 'esbuild'));
    }
    return root;
  }

  const run = (root: string) => spawnSync(process.execPath, [join(root, 'bin', 'punctual.mjs')], { encoding: 'utf8', timeout: 60_000 });

  it('builds a missing dist/, then a stale one, before the service starts, and drops files of old paths', () => {
    const root = fakePackage(true);
    try {
      const first = run(root);
      expect(first.stderr).toContain('punctual: dist/ is missing: building it first (npm run build)');
      expect(first.stdout).toBe('the built service ran\n');
      expect(first.status).toBe(0);

      // A file left by a source that moved away, and a source newer than the build.
      writeFileSync(join(root, 'dist', 'app', 'moved-away.js'), 'throw new Error("stale");');
      const past = new Date(Date.now() - 60_000);
      utimesSync(join(root, 'dist', 'app', 'main.js'), past, past);
      const second = run(root);
      expect(second.stderr).toContain('punctual: dist/ is older than src/: building it first (npm run build)');
      expect(second.stdout).toBe('the built service ran\n');
      expect(readdirSync(join(root, 'dist', 'app')).sort()).toEqual(['main.js']);

      const third = run(root);
      expect(third.stderr).toBe('');
      expect(third.stdout).toBe('the built service ran\n');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('refuses to start stale code when it cannot rebuild it, with a clear message', () => {
    const root = fakePackage(false);
    try {
      mkdirSync(join(root, 'dist', 'app'), { recursive: true });
      writeFileSync(join(root, 'dist', 'app', 'main.js'), "console.log('the stale service ran');");
      const past = new Date(Date.now() - 60_000);
      utimesSync(join(root, 'dist', 'app', 'main.js'), past, past);
      const result = run(root);
      expect(result.stdout).toBe('');
      expect(result.stderr.trim().split('\n')).toEqual([
        'punctual: dist/ is older than src/: building it first (npm run build)',
        'punctual: the build failed (is typescript installed? run `npm install`); not starting stale code',
      ]);
      expect(result.status).toBe(1);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
