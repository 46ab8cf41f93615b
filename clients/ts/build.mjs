/**
 * Builds @punctual/client into dist/: the client and the contract (src/contract) it is typed by,
 * .js and .d.ts, and nothing else. tsc compiles the contract from its one source rather than a
 * copy, so what ships is what the server validates with. A file of the server in dist/ means a
 * contract file imported one: the build fails and names it, before a user installs the server.
 * Run by `npm run build:client` at the root and before `npm pack` here (prepack).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const dist = join(here, 'dist');
const version = (path) => JSON.parse(readFileSync(path, 'utf8')).version;

const root = version(join(here, '..', '..', 'package.json'));
if (version(join(here, 'package.json')) !== root) {
  process.stderr.write(`@punctual/client: its version must be punctual's (${root}): set it in clients/ts/package.json\n`);
  process.exit(1);
}

rmSync(dist, { recursive: true, force: true });
// The repository's TypeScript: the client has no build dependencies of its own.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(here, 'tsconfig.json')], { stdio: 'inherit' });

const SHIPPED = ['clients/ts/src/', 'src/contract/'];
const stray = readdirSync(dist, { recursive: true, withFileTypes: true })
  .filter((entry) => entry.isFile())
  .map((entry) => relative(dist, join(entry.parentPath, entry.name)).split('\\').join('/'))
  .filter((path) => !SHIPPED.some((prefix) => path.startsWith(prefix)));
if (stray.length > 0) {
  process.stderr.write(
    `@punctual/client: the contract reaches into the server; dist/ would ship ${stray.join(', ')}.\n` +
      'src/contract may import only typebox and its own files.\n',
  );
  process.exit(1);
}
