/**
 * The service every client's tests run against, the way a shop meets it: the built server
 * (dist/app/main.js) as a child process on a free port, on a fresh database of its own with the
 * shop's tables, with an API token, a webhook secret, the settings the conformance cases need
 * (clients/conformance/cases.json `service.env`) and the conformance receiver.
 *
 * What it decides:
 * - One token (API_TOKEN: every route, the pull workers' included) and one webhook secret for all
 *   clients; a client's runner may add settings (more worker types, more secrets).
 * - WORKER_TYPES is the cases' and the runner's together, so a client's own tests and the
 *   conformance cases share one server.
 * - What a client's tests need to reach it is handed over in environment variables
 *   (`clientEnv`): PUNCTUAL_URL, PUNCTUAL_TOKEN, PUNCTUAL_WEBHOOK_SECRET, PUNCTUAL_RECEIVER_URL,
 *   PUNCTUAL_CONFORMANCE_CASES.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { type ServerProcess, startServer } from '../helpers/server.js';
import { createShop } from '../helpers/shop.js';
import { Receiver } from './receiver.js';

export const CASES_FILE = fileURLToPath(new URL('../../clients/conformance/cases.json', import.meta.url));
export const TOKEN = 'clients-token-0123456789abcdef';
export const WEBHOOK_SECRET = 'clients-webhook-secret-current';
/** A busy CI machine may take a while to boot a server; a broken one still fails in time. */
const START_TIMEOUT_MS = 60_000;

export interface ConformanceCases {
  service: { env: Record<string, string> };
  cases: { name: string; skip?: Record<string, string> }[];
}

export function readCases<T extends ConformanceCases = ConformanceCases>(): T {
  return JSON.parse(readFileSync(CASES_FILE, 'utf8')) as T;
}

export interface ClientService {
  db: TestDatabase;
  server: ServerProcess;
  receiver: Receiver;
  /** What a client's test runner is given to reach the service, the receiver and the cases. */
  clientEnv: Record<string, string>;
  stop(): Promise<void>;
}

export interface ClientServiceOptions {
  /** Settings for the server beyond the cases' (they win over the cases' where both name one). */
  env?: Record<string, string>;
  /** Worker types the client's own tests use, beside the cases'. */
  workerTypes?: string[];
}

export async function startClientService(label: string, options: ClientServiceOptions = {}): Promise<ClientService> {
  const { service } = readCases();
  const receiver = new Receiver();
  let db: TestDatabase | undefined;
  let server: ServerProcess | undefined;
  const stop = async () => {
    await server?.stop();
    await receiver.stop();
    await db?.drop();
  };
  try {
    db = await createTestDatabase(label);
    await createShop(db);
    await receiver.start();
    const workerTypes = [service.env.WORKER_TYPES, ...(options.workerTypes ?? [])].filter(Boolean).join(',');
    server = await startServer({
      env: {
        DATABASE_URL: db.url,
        API_TOKEN: TOKEN,
        WEBHOOK_SECRET,
        ...service.env,
        ...options.env,
        WORKER_TYPES: workerTypes,
      },
      timeoutMs: START_TIMEOUT_MS,
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    db,
    server,
    receiver,
    clientEnv: {
      PUNCTUAL_URL: server.baseUrl,
      PUNCTUAL_TOKEN: TOKEN,
      PUNCTUAL_WEBHOOK_SECRET: WEBHOOK_SECRET,
      PUNCTUAL_RECEIVER_URL: receiver.baseUrl,
      PUNCTUAL_CONFORMANCE_CASES: CASES_FILE,
    },
    stop,
  };
}

/**
 * A second punctual on the test clock (`start --test-clock`), on a shop database of its own, for
 * the clients' clock tests and the shop flows of docs/testing-your-shop.md: its variables are
 * PUNCTUAL_TEST_CLOCK_URL (same token) and PUNCTUAL_TEST_CLOCK_DSN (PDO) / _DB (the name).
 */
export async function startTestClockService(label: string): Promise<{ env: Record<string, string>; stop(): Promise<void> }> {
  let db: TestDatabase | undefined;
  let server: ServerProcess | undefined;
  const stop = async () => {
    await server?.stop();
    await db?.drop();
  };
  try {
    db = await createTestDatabase(`${label}_clock`);
    await createShop(db);
    server = await startServer({
      main: fileURLToPath(new URL('../../bin/punctual.mjs', import.meta.url)),
      args: ['start', '--test-clock'],
      env: { DATABASE_URL: db.url, API_TOKEN: TOKEN, TIMEZONE: 'Asia/Shanghai', WORKER_TYPES: 'flash_sale' },
      timeoutMs: START_TIMEOUT_MS,
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    env: {
      PUNCTUAL_TEST_CLOCK_URL: server.baseUrl,
      PUNCTUAL_TEST_CLOCK_DB: db.name,
      PUNCTUAL_TEST_CLOCK_DSN: `mysql:host=127.0.0.1;port=3306;dbname=${db.name};charset=utf8mb4`,
    },
    stop,
  };
}
