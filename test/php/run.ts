/**
 * `npm run test:php`: the PHP client's PHPUnit tests, the conformance cases among them
 * (clients/php/tests/ConformanceTest.php), against a real punctual and the local MariaDB, the way
 * a PHP shop would meet them. The common part (packages, build, database, server, receiver,
 * clean-up) is test/clients/run.ts.
 *
 * What it adds for PHP:
 * - PHP, PHPUnit and Composer are Debian's packages; the autoloader is built by
 *   `composer dump-autoload` (offline: the package has no dependencies, and Packagist may be out
 *   of reach).
 * - The server gets the next webhook secret too, a host key of its own for 127.0.0.2 (where a
 *   second receiver of the PHP tests listens), a short refill and the PHP tests' worker types.
 * - A second server on the same database behind a TCP proxy that is then cut, so a create meets
 *   the database outage and answers 503.
 * - PHPUnit gets (beside the service's variables) the DSN, the secrets and this script's arguments
 *   (`npm run test:php -- --filter Enqueue`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Proxy } from '../helpers/proxy.js';
import { type ServerProcess, startServer } from '../helpers/server.js';
import { has, runClientTests } from '../clients/run.js';
import { TOKEN } from '../clients/service.js';

const PHP_DIR = fileURLToPath(new URL('../../clients/php/', import.meta.url));
const SECRET_NEXT = 'php-webhook-secret-next';
/** The key of one receiving host of its own (WEBHOOK_HOST_SECRETS): calls to it are signed with this alone. */
const HOST_SECRET_HOST = '127.0.0.2';
const HOST_SECRET = 'php-webhook-secret-of-127.0.0.2';
const REFILL_INTERVAL_MS = 200;

function phpHas(extension: string): boolean {
  return spawnSync('php', ['-r', `exit(extension_loaded('${extension}') ? 0 : 1);`], { stdio: 'ignore' }).status === 0;
}

runClientTests({
  name: 'php',
  packages: [
    ['php-cli', () => has('php', ['-v'])],
    ['php-curl', () => phpHas('curl')],
    ['php-mysql', () => phpHas('pdo_mysql')],
    ['phpunit', () => has('phpunit', ['--version'])],
    ['composer', () => has('composer', ['--version'])],
  ],
  prepare: () =>
    execFileSync('composer', ['dump-autoload', '--dev', '--no-interaction', '--quiet'], {
      cwd: PHP_DIR,
      stdio: 'inherit',
      env: { ...process.env, COMPOSER_DISABLE_NETWORK: '1', COMPOSER_ALLOW_SUPERUSER: '1' },
    }),
  env: {
    WEBHOOK_SECRET_NEXT: SECRET_NEXT,
    WEBHOOK_ALLOWED_HOSTS: `127.0.0.1,${HOST_SECRET_HOST}`,
    WEBHOOK_HOST_SECRETS: `${HOST_SECRET_HOST}=${HOST_SECRET}`,
    REFILL_INTERVAL_MS: String(REFILL_INTERVAL_MS),
  },
  // The worker loop's tests (WorkerTest.php, TraceContextTest.php).
  workerTypes: ['php_worker_job', 'php_sigterm_job', 'php_batch_job', 'php_trace_job'],
  setUp: async ({ db }) => {
    const proxy = new Proxy();
    let down: ServerProcess | undefined;
    const stop = async () => {
      await down?.stop();
      await proxy.stop().catch(() => undefined);
    };
    try {
      await proxy.start();
      down = await startServer({ env: { DATABASE_URL: proxy.url(db.name), API_TOKEN: TOKEN }, timeoutMs: 60_000 });
      proxy.refuse(true);
      proxy.cutAll();
    } catch (error) {
      await stop();
      throw error;
    }
    return {
      env: {
        PUNCTUAL_DOWN_URL: down.baseUrl,
        PUNCTUAL_DSN: `mysql:host=127.0.0.1;port=3306;dbname=${db.name};charset=utf8mb4`,
        PUNCTUAL_DB_USER: 'root',
        PUNCTUAL_DB_PASSWORD: '',
        PUNCTUAL_WEBHOOK_SECRET_NEXT: SECRET_NEXT,
        PUNCTUAL_WEBHOOK_HOST: HOST_SECRET_HOST,
        PUNCTUAL_WEBHOOK_HOST_SECRET: HOST_SECRET,
        PUNCTUAL_REFILL_INTERVAL_MS: String(REFILL_INTERVAL_MS),
      },
      stop,
    };
  },
  command: ['phpunit', '--colors=never'],
  cwd: PHP_DIR,
});
