/**
 * `npm run demo`: runs the demo (scripts/demo.ts) compiled, and compiles it only when its build
 * is missing or older than its sources (the demo, the TypeScript client, the contract it is typed
 * by), saying so; a current build runs at once. Its build lives in dist-demo/, apart from the
 * server's dist/, so building the server leaves it alone. Plain JavaScript, so it needs nothing
 * compiled to run.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUILT = join(ROOT, 'dist-demo', 'scripts', 'demo.js');

function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

/** Why the demo must be compiled first, or undefined when its build is current. */
export function demoStaleness(root = ROOT) {
  const built = join(root, 'dist-demo', 'scripts', 'demo.js');
  if (!existsSync(built)) return 'it has not been built yet';
  const sources = ['scripts/demo.ts', 'clients/ts/src', 'src/contract', 'tsconfig.demo.json', 'tsconfig.json'].map((path) =>
    join(root, path),
  );
  return statSync(built).mtimeMs < Math.max(...sources.map(newest)) ? 'its sources changed since its last build' : undefined;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const why = demoStaleness();
  if (why !== undefined) {
    process.stdout.write(`building the demo first (${why})\n`);
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.demo.json')], { stdio: 'inherit' });
  }
  await import(pathToFileURL(BUILT).href);
}
