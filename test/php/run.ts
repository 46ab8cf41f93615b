/**
 * `npm run test:php`: the PHP client's PHPUnit tests against a real punctual and the local
 * MariaDB, the way a PHP shop would meet them.
 *
 * What it decides:
 * - PHP, PHPUnit and Composer are Debian's packages: missing ones are installed with apt when
 *   this runs as root with apt-get at hand; otherwise it stops with the command to run.
 * - The autoloader is built by `composer dump-autoload` (offline: the package has no
 *   dependencies, and Packagist may be out of reach).
 * - The server is built (npm run build) unless dist/ is newer than every file in src/.
 * - One fresh database of its own (punctual_test_php_<epoch>_<random>) with the shop's tables
 *   close_order works on; the built server (dist/app/main.js) on a free port with a token, webhook
 *   secrets (current and next; a host key of its own for 127.0.0.2, where a second receiver
 *   listens) and a short refill; a second server on the same database behind
 *   a TCP proxy that is then cut, so a create meets the database outage and answers 503.
 * - PHPUnit gets the URLs (and this script's arguments: `npm run test:php -- --filter Enqueue`), the DSN and the secrets in environment variables; whatever happens,
 *   the servers are stopped and the database is dropped afterwards. The exit code is PHPUnit's.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { Proxy } from '../helpers/proxy.js';
import { killLeftoverServers, type ServerProcess, startServer } from '../helpers/server.js';
import { createShop } from '../helpers/shop.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PHP_DIR = fileURLToPath(new URL('../../clients/php/', import.meta.url));
const TOKEN = 'php-client-token-0123456789';
const SECRET = 'php-webhook-secret-current';
const SECRET_NEXT = 'php-webhook-secret-next';
/** The key of one receiving host of its own (WEBHOOK_HOST_SECRETS): calls to it are signed with this alone. */
const HOST_SECRET_HOST = '127.0.0.2';
const HOST_SECRET = 'php-webhook-secret-of-127.0.0.2';
const REFILL_INTERVAL_MS = 200;
/** A busy CI machine may take a while to boot a server; a broken one still fails in time. */
const START_TIMEOUT_MS = 60_000;

/** Debian package → the command it provides. */
const PACKAGES: [pkg: string, check: () => boolean][] = [
  ['php-cli', () => has('php', ['-v'])],
  ['php-curl', () => phpHas('curl')],
  ['php-mysql', () => phpHas('pdo_mysql')],
  ['phpunit', () => has('phpunit', ['--version'])],
  ['composer', () => has('composer', ['--version'])],
];

function has(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}

function phpHas(extension: string): boolean {
  return spawnSync('php', ['-r', `exit(extension_loaded('${extension}') ? 0 : 1);`], { stdio: 'ignore' }).status === 0;
}

function ensurePackages(): void {
  const missing = PACKAGES.filter(([, check]) => !check()).map(([pkg]) => pkg);
  if (missing.length === 0) return;
  const command = `apt-get update && apt-get install -y ${missing.join(' ')}`;
  if (process.getuid?.() !== 0 || !has('apt-get', ['--version'])) {
    console.error(`test:php needs Debian's ${missing.join(', ')}: run as root: ${command}`);
    process.exit(1);
  }
  console.log(`test:php: installing ${missing.join(', ')} from Debian's packages`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env });
  const still = PACKAGES.filter(([, check]) => !check()).map(([pkg]) => pkg);
  if (still.length > 0) throw new Error(`still missing after apt-get install: ${still.join(', ')}`);
}

/** dist/ is older than some file in src/ (npm test builds it too: after it, this build is skipped). */
function buildIsStale(): boolean {
  const main = join(ROOT, 'dist/app/main.js');
  if (!existsSync(main)) return true;
  const built = statSync(main).mtimeMs;
  const sources = readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true });
  return sources.some((entry) => entry.isFile() && statSync(join(entry.parentPath, entry.name)).mtimeMs > built);
}

async function main(): Promise<number> {
  ensurePackages();
  execFileSync('composer', ['dump-autoload', '--dev', '--no-interaction', '--quiet'], {
    cwd: PHP_DIR,
    stdio: 'inherit',
    env: { ...process.env, COMPOSER_DISABLE_NETWORK: '1', COMPOSER_ALLOW_SUPERUSER: '1' },
  });
  if (buildIsStale()) execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });

  let db: TestDatabase | undefined;
  let server: ServerProcess | undefined;
  let down: ServerProcess | undefined;
  const proxy = new Proxy();
  const cleanUp = async () => {
    await Promise.all([server?.stop(), down?.stop()]);
    await proxy.stop().catch(() => undefined);
    await db?.drop();
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void cleanUp().finally(() => process.exit(1));
    });
  }
  try {
    db = await createTestDatabase('php');
    await createShop(db);
    server = await startServer({
      env: {
        DATABASE_URL: db.url,
        API_TOKEN: TOKEN,
        WEBHOOK_SECRET: SECRET,
        WEBHOOK_SECRET_NEXT: SECRET_NEXT,
        WEBHOOK_ALLOWED_HOSTS: `127.0.0.1,${HOST_SECRET_HOST}`,
        WEBHOOK_HOST_SECRETS: `${HOST_SECRET_HOST}=${HOST_SECRET}`,
        REFILL_INTERVAL_MS: String(REFILL_INTERVAL_MS),
        RETRY_BASE_MS: '100',
        // The worker loop's tests (WorkerTest.php).
        WORKER_TYPES: 'php_worker_job,php_sigterm_job,php_batch_job',
      },
      timeoutMs: START_TIMEOUT_MS,
    });
    await proxy.start();
    down = await startServer({ env: { DATABASE_URL: proxy.url(db.name), API_TOKEN: TOKEN }, timeoutMs: START_TIMEOUT_MS });
    proxy.refuse(true);
    proxy.cutAll();

    const phpunit = spawn('phpunit', ['--colors=never', ...process.argv.slice(2)], {
      cwd: PHP_DIR,
      stdio: 'inherit',
      env: {
        ...process.env,
        PUNCTUAL_URL: server.baseUrl,
        PUNCTUAL_TOKEN: TOKEN,
        PUNCTUAL_DOWN_URL: down.baseUrl,
        PUNCTUAL_DSN: `mysql:host=127.0.0.1;port=3306;dbname=${db.name};charset=utf8mb4`,
        PUNCTUAL_DB_USER: 'root',
        PUNCTUAL_DB_PASSWORD: '',
        PUNCTUAL_WEBHOOK_SECRET: SECRET,
        PUNCTUAL_WEBHOOK_SECRET_NEXT: SECRET_NEXT,
        PUNCTUAL_WEBHOOK_HOST: HOST_SECRET_HOST,
        PUNCTUAL_WEBHOOK_HOST_SECRET: HOST_SECRET,
        PUNCTUAL_REFILL_INTERVAL_MS: String(REFILL_INTERVAL_MS),
      },
    });
    const [code] = (await once(phpunit, 'exit')) as [number | null];
    if (code !== 0) {
      console.error('test:php: the last lines of the service log:');
      for (const line of server.logs.slice(-15)) console.error(JSON.stringify(line));
      for (const line of server.stderr.slice(-15)) console.error(line);
    }
    return code ?? 1;
  } finally {
    await cleanUp();
    killLeftoverServers();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('test:php failed:', error);
    process.exit(1);
  },
);
