/**
 * Runs before `npm start`: the service runs the compiled dist/, built when the package is
 * installed (`prepare`), so a start does not wait ~12 s for the compiler. A dist/ older than the
 * sources (a pull or an edit since the last build) is rebuilt here, with a message saying so,
 * rather than run: stale code must never run silently. Up to date, this costs a few ms of stat
 * calls. Plain JavaScript, so it needs nothing compiled to run.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from './build.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = join(root, 'dist', 'app', 'main.js');

/** The newest modification time (ms) of the build's inputs: every file in src/ and the configs. */
function newestSource() {
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

const reason = !existsSync(built) ? 'dist/ is missing' : statSync(built).mtimeMs < newestSource() ? 'dist/ is older than src/' : undefined;

if (reason !== undefined) {
  process.stderr.write(`punctual: ${reason}: building it first (npm run build)\n`);
  try {
    build();
  } catch {
    process.stderr.write('punctual: the build failed (is typescript installed? run `npm install`); not starting stale code\n');
    process.exit(1);
  }
}
