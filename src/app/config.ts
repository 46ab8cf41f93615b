import { isIP } from 'node:net';
import { redactCredentials } from '../observability/redact.js';
import { DatabaseUrlError, parseDatabaseUrl } from '../db/hosts.js';
import { canonicalZone } from '../time/zones.js';
import { ROLES, type Role } from '../contract/auth.js';

/** Everything punctual reads from its environment, validated once at start. */
export interface Config {
  databaseUrl: string;
  /** The database named in DATABASE_URL; created at start when missing. */
  databaseName: string;
  host: string;
  port: number;
  timezone: string;
  apiToken: string | undefined;
  /** Tokens with one role each (API_TOKENS_READ, _WRITE, _ADMIN); API_TOKEN may do everything. */
  roleTokens: Record<Role, string[]>;
  horizonMs: number;
  refillIntervalMs: number;
  reconcileIntervalMs: number;
  concurrency: number;
  batchSize: number;
  dbPoolSize: number;
  lockWaitTimeoutS: number;
  stopTimeoutMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  misfireGraceMs: number;
  logLevel: string;
  webhookSecret: string | undefined;
  webhookSecretNext: string | undefined;
  webhookAllowedHosts: string[];
  webhookTimeoutMs: number;
  /** Finished tasks (done, cancelled, skipped) are deleted this long after they finished; 0 keeps them. */
  retentionMs: number;
  /** Failed tasks are deleted this long after they failed; 0 keeps them. */
  failedRetentionMs: number;
  /** How often the retention sweep runs. */
  retentionIntervalMs: number;
  /** Rows one retention DELETE removes at most. */
  retentionBatchSize: number;
  /** The pause between two retention DELETEs, so the sweep never hogs the table. */
  retentionPauseMs: number;
  /** Per-host webhook keys (`host` or `host:port` → key); a listed host is signed with its own key only. */
  webhookHostSecrets: Map<string, string>;
  webhookHostSecretsNext: Map<string, string>;
  /** Hosts whose error answers may be quoted (briefly) in lastError; others give status and size. */
  webhookTrustedHosts: string[];
  /** Host names the API answers to without a token, besides loopback and HOST (DNS rebinding). */
  allowedHostNames: string[];
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  /** Requests with a wrong or missing token one client address may make per minute. */
  authFailuresPerMinute: number;
  /** Several instances share the tasks by shard leases (src/cluster/); off: every process arms every task. */
  sharding: boolean;
  /** How long a shard lease lasts; renewed every third of it. */
  leaseMs: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const MAX_TIMER_MS = 2 ** 31 - 1;
const DAY_MS = 24 * 3600_000;

function text(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^-?\d+$/.test(raw)) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
  }
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${raw}`);
  }
  return value;
}

function databaseNameOf(url: string): string {
  let parsed: URL;
  try {
    // Several hosts (host1:port,host2:port) are checked one by one; the rest is the same for all.
    const { urls } = parseDatabaseUrl(url);
    for (const hostUrl of urls.slice(1)) new URL(hostUrl);
    parsed = new URL(urls[0]!);
  } catch (error) {
    // The text may hold a password: show it only with credentials masked.
    const shown = JSON.stringify(redactCredentials(url));
    if (error instanceof DatabaseUrlError && !error.message.includes('is not a URL')) {
      throw new ConfigError(`${error.message}, in ${shown}`);
    }
    throw new ConfigError(`DATABASE_URL is not a URL (mysql://user:password@host:port/database): ${shown}`);
  }
  if (parsed.protocol !== 'mysql:') {
    throw new ConfigError(`DATABASE_URL must start with mysql://, got ${JSON.stringify(parsed.protocol)}`);
  }
  const name = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_$]{1,64}$/.test(name)) {
    throw new ConfigError(
      `DATABASE_URL must name a database made of letters, digits, _ or $ (e.g. mysql://root@127.0.0.1:3306/punctual), got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** `host` (any port) or `host:port`, lower-cased; IPv6 literals in brackets. */
function allowedHosts(raw: string | undefined, name = 'WEBHOOK_ALLOWED_HOSTS'): string[] {
  if (raw === undefined) return [];
  return raw
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '')
    .map((entry) => {
      if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/.test(entry)) {
        throw new ConfigError(`${name} entries must be host or host:port, got ${JSON.stringify(entry)}`);
      }
      return entry;
    });
}

/** `host` or `host:port`=key pairs, comma-separated; a key of at least 16 characters. */
function hostSecrets(raw: string | undefined, name: string): Map<string, string> {
  const secrets = new Map<string, string>();
  for (const entry of (raw ?? '').split(',')) {
    if (entry.trim() === '') continue;
    const at = entry.indexOf('=');
    const host = entry.slice(0, Math.max(at, 0)).trim().toLowerCase();
    const secret = entry.slice(at + 1).trim();
    if (at < 1 || !/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/.test(host) || secret.length < 16) {
      // Never echo the entry: it holds a key.
      throw new ConfigError(`${name} entries must be host=key or host:port=key with a key of at least 16 characters`);
    }
    secrets.set(host, secret);
  }
  return secrets;
}

/** Host names (no port), lower-cased. */
function hostNames(raw: string | undefined, name: string): string[] {
  return (raw ?? '')
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '')
    .map((entry) => {
      if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)$/.test(entry)) {
        throw new ConfigError(`${name} entries must be host names without a port, got ${JSON.stringify(entry)}`);
      }
      return entry;
    });
}

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1';
  return false;
}

/**
 * The tokens of one role: comma-separated, each at least 16 characters of printable ASCII
 * without spaces or commas. A message names the setting and the entry's position, never the token.
 */
function roleTokens(env: Env, name: string): string[] {
  const raw = text(env, name);
  if (raw === undefined) return [];
  return raw.split(',').map((entry, index) => {
    const token = entry.trim();
    if (token.length < 16 || !/^[\x21-\x7e]+$/.test(token)) {
      throw new ConfigError(
        `${name} entry ${index + 1} must be at least 16 printable characters without spaces (the tokens are comma-separated)`,
      );
    }
    return token;
  });
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = text(env, 'DATABASE_URL') ?? 'mysql://root@127.0.0.1:3306/punctual';
  const databaseName = databaseNameOf(databaseUrl);

  const rawZone = text(env, 'TIMEZONE') ?? 'UTC';
  const timezone = canonicalZone(rawZone);
  if (timezone === undefined) {
    throw new ConfigError(`TIMEZONE must be an IANA time zone such as Asia/Shanghai or UTC, got ${JSON.stringify(rawZone)}`);
  }

  const host = text(env, 'HOST') ?? '127.0.0.1';
  const apiToken = text(env, 'API_TOKEN');
  if (apiToken !== undefined && apiToken.length < 16) {
    throw new ConfigError('API_TOKEN must be at least 16 characters long');
  }
  const scoped = {
    read: roleTokens(env, 'API_TOKENS_READ'),
    write: roleTokens(env, 'API_TOKENS_WRITE'),
    admin: roleTokens(env, 'API_TOKENS_ADMIN'),
  } satisfies Record<Role, string[]>;
  const seen = new Set(apiToken === undefined ? [] : [apiToken]);
  for (const role of ROLES) {
    for (const token of scoped[role]) {
      // One token, one role: a token listed twice would have whichever role was checked last.
      if (seen.has(token))
        throw new ConfigError(`a token in API_TOKENS_${role.toUpperCase()} is also given elsewhere: each token may appear once`);
      seen.add(token);
    }
  }
  if (seen.size === 0 && !isLoopback(host)) {
    throw new ConfigError(`HOST ${host} is reachable from other machines: set API_TOKEN, or listen on 127.0.0.1`);
  }

  const logLevel = (text(env, 'LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }

  const concurrency = integer(env, 'CONCURRENCY', 4, 1, 256);
  const dbPoolSize = integer(env, 'DB_POOL_SIZE', concurrency + 6, 2, 1000);
  if (dbPoolSize <= concurrency) {
    throw new ConfigError(
      `DB_POOL_SIZE (${dbPoolSize}) must be greater than CONCURRENCY (${concurrency}): requests and the refill need connections too`,
    );
  }
  const refillIntervalMs = integer(env, 'REFILL_INTERVAL_MS', 1000, 10, 60_000);
  const horizonMs = integer(env, 'HORIZON_MS', 10 * 60_000, 1000, MAX_TIMER_MS);
  if (horizonMs <= refillIntervalMs) {
    throw new ConfigError(`HORIZON_MS (${horizonMs}) must be longer than REFILL_INTERVAL_MS (${refillIntervalMs})`);
  }
  const retryBaseMs = integer(env, 'RETRY_BASE_MS', 2000, 1, MAX_TIMER_MS);
  const webhookSecret = text(env, 'WEBHOOK_SECRET');
  const webhookSecretNext = text(env, 'WEBHOOK_SECRET_NEXT');
  if (webhookSecretNext !== undefined && webhookSecret === undefined) {
    throw new ConfigError('WEBHOOK_SECRET_NEXT is the key that will replace WEBHOOK_SECRET: set WEBHOOK_SECRET too');
  }

  const webhookHostSecrets = hostSecrets(text(env, 'WEBHOOK_HOST_SECRETS'), 'WEBHOOK_HOST_SECRETS');
  const webhookHostSecretsNext = hostSecrets(text(env, 'WEBHOOK_HOST_SECRETS_NEXT'), 'WEBHOOK_HOST_SECRETS_NEXT');
  for (const host of webhookHostSecretsNext.keys()) {
    if (!webhookHostSecrets.has(host)) {
      throw new ConfigError(`WEBHOOK_HOST_SECRETS_NEXT names ${host}, which has no key in WEBHOOK_HOST_SECRETS to replace`);
    }
  }
  const requestTimeoutMs = integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 1000, 3600_000);
  const headersTimeoutMs = integer(env, 'HEADERS_TIMEOUT_MS', Math.min(10_000, requestTimeoutMs), 500, 3600_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(`HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not be longer than REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }

  const rawSharding = (text(env, 'SHARDING') ?? 'off').toLowerCase();
  if (rawSharding !== 'on' && rawSharding !== 'off') {
    throw new ConfigError(`SHARDING must be on or off, got ${JSON.stringify(rawSharding)}`);
  }
  const leaseMs = integer(env, 'LEASE_MS', 5000, 300, 600_000);

  return {
    sharding: rawSharding === 'on',
    leaseMs,
    databaseUrl,
    databaseName,
    host,
    port: integer(env, 'PORT', 3000, 0, 65535),
    timezone,
    apiToken,
    roleTokens: scoped,
    horizonMs,
    refillIntervalMs,
    reconcileIntervalMs: integer(env, 'RECONCILE_INTERVAL_MS', 60_000, 100, 24 * 3600_000),
    concurrency,
    batchSize: integer(env, 'BATCH_SIZE', 50, 1, 1000),
    dbPoolSize,
    lockWaitTimeoutS: integer(env, 'LOCK_WAIT_TIMEOUT_S', 5, 1, 3600),
    stopTimeoutMs: integer(env, 'STOP_TIMEOUT_MS', 10_000, 0, 3600_000),
    maxAttempts: integer(env, 'MAX_ATTEMPTS', 4, 1, 1000),
    retryBaseMs,
    retryMaxMs: Math.max(retryBaseMs, integer(env, 'RETRY_MAX_MS', 3600_000, 1, MAX_TIMER_MS)),
    misfireGraceMs: integer(env, 'MISFIRE_GRACE_MS', 60_000, 0, MAX_TIMER_MS),
    logLevel,
    webhookSecret,
    webhookSecretNext,
    webhookAllowedHosts: allowedHosts(text(env, 'WEBHOOK_ALLOWED_HOSTS'), 'WEBHOOK_ALLOWED_HOSTS'),
    webhookTimeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 600_000),
    retentionMs: integer(env, 'RETENTION_MS', 7 * DAY_MS, 0, 100 * 365 * DAY_MS),
    failedRetentionMs: integer(env, 'FAILED_RETENTION_MS', 30 * DAY_MS, 0, 100 * 365 * DAY_MS),
    retentionIntervalMs: integer(env, 'RETENTION_INTERVAL_MS', 10 * 60_000, 1000, 24 * 3600_000),
    retentionBatchSize: integer(env, 'RETENTION_BATCH_SIZE', 500, 1, 10_000),
    retentionPauseMs: integer(env, 'RETENTION_PAUSE_MS', 200, 0, 60_000),
    webhookHostSecrets,
    webhookHostSecretsNext,
    webhookTrustedHosts: allowedHosts(text(env, 'WEBHOOK_TRUSTED_HOSTS'), 'WEBHOOK_TRUSTED_HOSTS'),
    allowedHostNames: hostNames(text(env, 'ALLOWED_HOST_NAMES'), 'ALLOWED_HOST_NAMES'),
    requestTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3600_000),
    maxConnections: integer(env, 'MAX_CONNECTIONS', 1024, 1, 1_000_000),
    authFailuresPerMinute: integer(env, 'AUTH_FAILURES_PER_MINUTE', 30, 1, 1_000_000),
  };
}
