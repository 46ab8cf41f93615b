import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/app/config.js';

describe('configuration', () => {
  it('has defaults for everything', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      databaseUrl: 'mysql://root@127.0.0.1:3306/punctual',
      databaseName: 'punctual',
      host: '127.0.0.1',
      port: 3000,
      timezone: 'UTC',
      apiToken: undefined,
      concurrency: 4,
      maxAttempts: 4,
      logLevel: 'info',
      webhookAllowedHosts: [],
    });
    expect(config.dbPoolSize).toBeGreaterThan(config.concurrency);
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
      databaseName: 'shop',
      host: '0.0.0.0',
      port: 8080,
      timezone: 'Asia/Shanghai',
      horizonMs: 300_000,
      refillIntervalMs: 500,
      concurrency: 8,
      dbPoolSize: 20,
      stopTimeoutMs: 5000,
      maxAttempts: 6,
      logLevel: 'debug',
      webhookSecret: 'whsec',
      webhookAllowedHosts: ['hooks.example.com', '10.0.0.5:8443', '[::1]:9000'],
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
  ])('refuses %j with one clear line', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('shares the tasks by shard leases only when asked, with a lease it can renew', () => {
    expect(loadConfig({})).toMatchObject({ sharding: false, leaseMs: 5000 });
    expect(loadConfig({ SHARDING: 'ON', LEASE_MS: '3000' })).toMatchObject({ sharding: true, leaseMs: 3000 });
    expect(() => loadConfig({ SHARDING: 'yes' })).toThrow('SHARDING must be on or off');
    expect(() => loadConfig({ LEASE_MS: '100' })).toThrow('LEASE_MS must be an integer between 300 and 600000');
  });

  it('listens on loopback without a token', () => {
    for (const host of ['127.0.0.1', 'localhost', '::1', '127.0.0.2']) expect(loadConfig({ HOST: host }).host).toBe(host);
  });
});
