/**
 * `npm run build`: empties dist/, compiles src/ into it and copies the dashboard's static files
 * beside the compiled route that serves them, so the built package runs without src/. dist/ is
 * emptied first so a file whose source was moved or deleted does not linger there, importable.
 * Plain JavaScript, so it needs nothing compiled to run.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export function build(root = ROOT) {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  // Checked before dist/ is emptied: without a compiler, what was built stays.
  if (!existsSync(tsc)) throw new Error('typescript is not installed (npm install)');
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  cpSync(join(root, 'src', 'http', 'dashboard'), join(root, 'dist', 'http', 'dashboard'), { recursive: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) build();
