import { describe, expect, it } from 'vitest';
import { Value } from 'typebox/value';
import { ConfigError, loadConfig } from '../../src/app/config.js';
import { VARIABLES, type Variable } from '../../src/app/config-table.js';

describe('configuration', () => {
  it('has defaults for everything', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      database: { url: 'mysql://root@127.0.0.1:3306/punctual', name: 'punctual', poolSize: 10 },
      http: { host: '127.0.0.1', port: 3000, apiToken: undefined, headersTimeoutMs: 10_000 },
      tasks: { timezone: 'UTC', maxAttempts: 4 },
      dispatcher: { concurrency: 4 },
      service: { logLevel: 'info' },
      webhook: { allowedHosts: [], hostSecrets: new Map() },
      roles: { read: [], write: [], admin: [] },
    });
    expect(config.database.poolSize).toBeGreaterThan(config.dispatcher.concurrency);
  });

  it('reads every setting', () => {
    const config = loadConfig({
      DATABASE_URL: 'mysql://app:secret@db.internal:3307/shop',
      HOST: '0.0.0.0',
      PORT: '8080',
      TIMEZONE: 'asia/shanghai',
      API_TOKEN: 'a-token-of-enough-length',
      HORIZON_MS: '300000',
      REFILL_INTERVAL_MS: '500',
      CONCURRENCY: '8',
      DB_POOL_SIZE: '20',
      STOP_TIMEOUT_MS: '5000',
      MAX_ATTEMPTS: '6',
      LOG_LEVEL: 'DEBUG',
      WEBHOOK_SECRET: 'whsec',
      WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com, 10.0.0.5:8443 ,[::1]:9000',
    });
    expect(config).toMatchObject({
      database: { name: 'shop', poolSize: 20 },
      http: { host: '0.0.0.0', port: 8080 },
      tasks: { timezone: 'Asia/Shanghai', maxAttempts: 6 },
      scheduler: { horizonMs: 300_000, refillIntervalMs: 500 },
      dispatcher: { concurrency: 8 },
      service: { stopTimeoutMs: 5000, logLevel: 'debug' },
      webhook: { secret: 'whsec', allowedHosts: ['hooks.example.com', '10.0.0.5:8443', '[::1]:9000'] },
    });
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT must be an integer between 0 and 65535, got "abc"'],
    [{ PORT: '70000' }, 'PORT must be an integer between 0 and 65535, got 70000'],
    [{ TIMEZONE: 'Mars/Olympus' }, 'TIMEZONE must be an IANA time zone'],
    [{ TIMEZONE: '+08:00' }, 'TIMEZONE must be an IANA time zone'],
    [{ DATABASE_URL: 'postgres://x/y' }, 'DATABASE_URL must start with mysql://'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL is not a URL'],
    [{ DATABASE_URL: 'mysql://root@127.0.0.1:3306/' }, 'DATABASE_URL must name a database'],
    [{ DATABASE_URL: 'mysql://root@127.0.0.1:3306/a-b' }, 'DATABASE_URL must name a database'],
    [{ CONCURRENCY: '0' }, 'CONCURRENCY must be an integer between 1 and 256'],
    [{ CONCURRENCY: '8', DB_POOL_SIZE: '8' }, 'DB_POOL_SIZE (8) must be greater than CONCURRENCY (8)'],
    [{ HORIZON_MS: '1000', REFILL_INTERVAL_MS: '1000' }, 'HORIZON_MS (1000) must be longer than REFILL_INTERVAL_MS (1000)'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be one of'],
    [{ API_TOKEN: 'short' }, 'API_TOKEN must be at least 16 characters'],
    [{ HOST: '0.0.0.0' }, 'HOST 0.0.0.0 is reachable from other machines: set API_TOKEN'],
    [{ WEBHOOK_ALLOWED_HOSTS: 'http://x.com/path' }, 'WEBHOOK_ALLOWED_HOSTS entries must be host or host:port'],
    [{ MAX_ATTEMPTS: '1.5' }, 'MAX_ATTEMPTS must be an integer'],
    [{ ALLOWED_HOST_NAMES: 'shop.example:8080' }, 'ALLOWED_HOST_NAMES entries must be host names without a port, got "shop.example:8080"'],
    [{ WEBHOOK_TRUSTED_HOSTS: 'a b' }, 'WEBHOOK_TRUSTED_HOSTS entries must be host or host:port, got "a b"'],
    [{ WEBHOOK_SECRET_NEXT: 'the-next-key' }, 'WEBHOOK_SECRET_NEXT is the key that will replace WEBHOOK_SECRET: set WEBHOOK_SECRET too'],
    [
      { WEBHOOK_HOST_SECRETS: 'a.example=0123456789abcdef', WEBHOOK_HOST_SECRETS_NEXT: 'b.example=0123456789abcdef' },
      'WEBHOOK_HOST_SECRETS_NEXT names b.example, which has no key in WEBHOOK_HOST_SECRETS to replace',
    ],
    [
      { REQUEST_TIMEOUT_MS: '5000', HEADERS_TIMEOUT_MS: '6000' },
      'HEADERS_TIMEOUT_MS (6000) must not be longer than REQUEST_TIMEOUT_MS (5000)',
    ],
    [{ RETENTION_MS: '-1' }, 'RETENTION_MS must be an integer between 0 and 3153600000000, got -1'],
  ])('refuses %j with one clear line', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('never shows a token or a key in its message', () => {
    for (const [env, secret] of [
      [{ API_TOKEN: 'short-secret' }, 'short-secret'],
      [{ API_TOKENS_WRITE: 'tiny secret' }, 'tiny'],
      [{ WEBHOOK_HOST_SECRETS: 'a.example=short-key' }, 'short-key'],
      [{ DATABASE_URL: 'postgres://app:hunter2hunter2@db/shop' }, 'hunter2'],
    ] as const) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).not.toThrow(secret);
    }
  });

  it('computes a default from another variable, and keeps the longest retry delay at least the first', () => {
    expect(loadConfig({ CONCURRENCY: '10' }).database.poolSize).toBe(16);
    expect(loadConfig({ REQUEST_TIMEOUT_MS: '5000' }).http.headersTimeoutMs).toBe(5000);
    expect(loadConfig({ REQUEST_TIMEOUT_MS: '60000' }).http.headersTimeoutMs).toBe(10_000);
    expect(loadConfig({ RETRY_BASE_MS: '5000', RETRY_MAX_MS: '1000' }).retry).toEqual({ baseMs: 5000, maxMs: 5000 });
  });

  it('has a default of its own kind for every variable of the table', () => {
    for (const [name, { kind, default: fallback }] of Object.entries(VARIABLES) as [string, Variable][]) {
      if (fallback === undefined || (typeof fallback === 'object' && fallback !== null && 'shown' in fallback)) continue;
      const values = fallback instanceof Map ? [Object.fromEntries(fallback)] : Array.isArray(fallback) ? fallback : [fallback];
      for (const value of values) expect(Value.Check(kind.schema, value), name).toBe(true);
    }
  });

  it('shares the tasks by shard leases only when asked, with a lease it can renew', () => {
    expect(loadConfig({}).cluster).toEqual({ sharding: false, leaseMs: 5000 });
    expect(loadConfig({ SHARDING: 'ON', LEASE_MS: '3000' }).cluster).toEqual({ sharding: true, leaseMs: 3000 });
    expect(() => loadConfig({ SHARDING: 'yes' })).toThrow('SHARDING must be on or off');
    expect(() => loadConfig({ LEASE_MS: '100' })).toThrow('LEASE_MS must be an integer between 300 and 600000');
  });

  it('listens on loopback without a token', () => {
    for (const host of ['127.0.0.1', 'localhost', '::1', '127.0.0.2']) expect(loadConfig({ HOST: host }).http.host).toBe(host);
  });
});
