/**
 * The service runs the compiled dist/, built when the package is installed (`prepare`), so a
 * start does not wait ~12 s for the compiler. The entry (bin/punctual.mjs, what `npm start`
 * runs) calls ensureBuild() before it loads dist/: a dist/ that is missing or older than the
 * sources (a pull or an edit since the last build) is rebuilt here, with a message saying so,
 * rather than run; when the build fails the start is refused. Stale code must never run
 * silently. Up to date, this costs a few ms of stat calls. Plain JavaScript, so it needs nothing
 * compiled to run.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from './build.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The newest modification time (ms) of the build's inputs: every file in src/ and the configs. */
function newestSource(root) {
  let newest = 0;
  const visit = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) visit(path);
      else newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  if (existsSync(join(root, 'src'))) visit(join(root, 'src'));
  for (const config of ['tsconfig.json', 'tsconfig.build.json']) {
    const path = join(root, config);
    if (existsSync(path)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** Why dist/ must be built before it may run, or undefined when it is up to date. */
export function staleness(root = ROOT) {
  const built = join(root, 'dist', 'app', 'main.js');
  if (!existsSync(built)) return 'dist/ is missing';
  if (statSync(built).mtimeMs < newestSource(root)) return 'dist/ is older than src/';
  return undefined;
}

/** Builds dist/ when it is missing or stale; exits 1 with a clear message when that fails. */
export function ensureBuild(root = ROOT) {
  const reason = staleness(root);
  if (reason === undefined) return;
  process.stderr.write(`punctual: ${reason}: building it first (npm run build)\n`);
  try {
    build(root);
  } catch {
    process.stderr.write('punctual: the build failed (is typescript installed? run `npm install`); not starting stale code\n');
    process.exit(1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) ensureBuild();
