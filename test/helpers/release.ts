/**
 * A previous release's built server, for the upgrade tests: its commit (releases.json) extracted
 * with `git archive` into node_modules/.cache/punctual-releases/<commit>, installed (`npm ci`) and
 * built there once, then reused by every run until the commit changes. The folder appears whole
 * or not at all (built under another name, then renamed), so an interrupted build is built again.
 * Nothing outside that cache folder is written, and the checkout's git metadata is not touched.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CACHE = join(ROOT, 'node_modules', '.cache', 'punctual-releases');

export interface Release {
  version: string;
  commit: string;
}

/** The releases this checkout lists, newest first. */
export function releases(): Release[] {
  return (JSON.parse(readFileSync(join(ROOT, 'releases.json'), 'utf8')) as { releases: Release[] }).releases;
}

/** The path of `release`'s dist/app/main.js, built on first use (a few minutes: npm ci and the build). */
export function builtRelease(release: Release): string {
  const folder = join(CACHE, release.commit);
  const main = join(folder, 'dist', 'app', 'main.js');
  if (existsSync(main)) return main;
  const partial = `${folder}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  try {
    const archive = execFileSync('git', ['-C', ROOT, 'archive', '--format=tar', release.commit], { maxBuffer: 1 << 30 });
    execFileSync('tar', ['-x', '-C', partial], { input: archive });
    const quiet = { cwd: partial, stdio: 'pipe' as const, timeout: 600_000 };
    execFileSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], quiet);
    execFileSync('npm', ['run', 'build', '--silent'], quiet);
    if (!existsSync(join(partial, 'dist', 'app', 'main.js'))) throw new Error(`${release.version}'s build made no dist/app/main.js`);
    if (existsSync(folder)) rmSync(partial, { recursive: true, force: true });
    else renameSync(partial, folder);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    throw error;
  }
  return main;
}

/**
 * `release`'s drizzle/ folder (its migrations and journal), extracted from its commit once into
 * node_modules/.cache/punctual-releases/<commit>-drizzle: a database as that release left it,
 * without building the release.
 */
export function releaseMigrations(release: Release): string {
  const folder = join(CACHE, `${release.commit}-drizzle`);
  if (existsSync(join(folder, 'meta', '_journal.json'))) return folder;
  const partial = `${folder}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const archive = execFileSync('git', ['-C', ROOT, 'archive', '--format=tar', release.commit, 'drizzle'], { maxBuffer: 1 << 28 });
  execFileSync('tar', ['-x', '-C', partial, '--strip-components=1'], { input: archive });
  if (existsSync(folder)) rmSync(partial, { recursive: true, force: true });
  else renameSync(partial, folder);
  return folder;
}
