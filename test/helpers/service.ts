/**
 * punctual in the test process, against a real database of the test's own: the same Service the
 * server runs, with its log captured and its clock replaceable.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Clock } from '../../src/time/clock.js';
import { loadConfig } from '../../src/app/config.js';
import type { TaskHandler } from '../../src/handlers/handler.js';
import { createRegistry } from '../../src/handlers/registry.js';
import { Service } from '../../src/app/service.js';
import type { TestDatabase } from './db.js';

export interface TestService extends Service {
  logs: Record<string, unknown>[];
  /** inject() with a JSON body, answering status and parsed body. */
  call<T = any>(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T }>;
}

export async function startTestService(
  db: TestDatabase,
  env: Record<string, string> = {},
  options: { clock?: Clock; handlers?: TaskHandler[]; boot?: boolean; definitions?: readonly unknown[] } = {},
): Promise<TestService> {
  const config = loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'debug', RETRY_BASE_MS: '100', ...env });
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') logs.push(JSON.parse(line));
      done();
    },
  });
  const logger = pino({ level: config.service.logLevel, redact: { paths: ['req.headers.authorization'], censor: '[redacted]' } }, sink);
  const registry = createRegistry(config.webhook, config.workers.types, config.handlers.closeOrder);
  for (const handler of options.handlers ?? []) registry.register(handler);
  const service = new Service(config, { logger, clock: options.clock, registry, handlers: options.definitions }) as TestService;
  service.logs = logs;
  service.call = async (method, url, body, headers = {}) => {
    const response = await service.app.inject({
      method: method as 'GET',
      url,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      payload: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: response.statusCode, body: response.body === '' ? (undefined as never) : response.json() };
  };
  if (options.boot !== false) await service.boot();
  return service;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
