/**
 * `npm run build`: compiles src/ into dist/ and copies the dashboard's static files beside the
 * compiled route that serves them, so the built package runs without src/.
 * Plain JavaScript, so it needs nothing compiled to run.
 */
import { execFileSync } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

export function build() {
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')], {
    stdio: 'inherit',
  });
  cpSync(join(root, 'src', 'http', 'dashboard'), join(root, 'dist', 'http', 'dashboard'), { recursive: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) build();
