/**
 * Every environment variable punctual reads, as one table: its name, the slice of the service it
 * configures (each part is handed its own slice, never the whole configuration), the field it
 * fills there, its kind, its default and what it means. config.ts reads the environment by this
 * table, the Config type is derived from it, and docs/configuration.md is generated from it
 * (`npm run docs:config`; a test fails when the file lags behind). A new variable is one entry here.
 *
 * Checks that tie several variables together (a pool larger than the concurrency, …) are the
 * RULES at the end, after every variable has been read.
 */
import { isIP } from 'node:net';
import { ROLES } from '../contract/auth.js';
import {
  type Kind,
  autoOr,
  databaseUrl,
  file,
  hostKeys,
  hostNames,
  hosts,
  integer,
  milliseconds,
  namedTokens,
  onOff,
  oneOf,
  secret,
  text,
  targetList,
  tokens,
  typeNames,
  zone,
} from './config-kinds.js';
import { closeOrderMapping, modulePaths, procedureList } from './config-handlers.js';
import { DEFAULT_CLOSE_ORDER } from '../handlers/close-order.js';

/** The slices, in the order the docs show them. */
export const SLICES = {
  database: 'Database',
  http: 'HTTP and security',
  roles: 'Tokens with one role',
  tasks: 'Task defaults',
  scheduler: 'Scheduler',
  dispatcher: 'Dispatcher',
  retry: 'Retries',
  webhook: 'Webhooks',
  workers: 'Pull workers',
  targets: 'Delivery targets',
  retention: 'Retention',
  cluster: 'Several instances',
  handlers: 'Your own handlers',
  service: 'The process',
} as const;

export type SliceName = keyof typeof SLICES;

/** A default computed from another variable's value, as the docs say it. */
export interface Derived<T> {
  readonly from: string;
  readonly compute: (value: never) => T;
  readonly shown: string;
}

export interface Variable<S extends SliceName = SliceName, K extends string = string, T = unknown, Required extends boolean = boolean> {
  readonly slice: S;
  readonly key: K;
  readonly kind: Kind<T>;
  /** Undefined for a variable without a default: its value is then undefined. */
  readonly default: T | Derived<T> | undefined;
  readonly meaning: string;
  /** Phantom: whether the value is always there. */
  readonly required?: Required;
  /** A secret that may come from a file instead: `<NAME>_FILE` names the file (its content, trailing newline trimmed). */
  readonly fromFile?: boolean;
}

/** A variable with a default (or a default computed from another one). */
function setting<S extends SliceName, K extends string, T>(
  slice: S,
  key: K,
  kind: Kind<T>,
  fallback: NoInfer<T> | Derived<NoInfer<T>>,
  meaning: string,
): Variable<S, K, T, true> {
  return { slice, key, kind, default: fallback, meaning };
}

/** A variable whose value is undefined when it is not set. */
function optional<S extends SliceName, K extends string, T>(slice: S, key: K, kind: Kind<T>, meaning: string): Variable<S, K, T, false> {
  return { slice, key, kind, default: undefined, meaning };
}

/**
 * A secret that may also be given as `<NAME>_FILE`, the path of a file holding it: the container
 * and Kubernetes convention, which keeps the secret out of the environment (and out of `ps e`).
 */
function orFile<V extends Variable>(variable: V): V {
  return { ...variable, fromFile: true };
}

/** A default computed from the value of variable `from`. */
function after<U, T>(from: string, compute: (value: U) => T, shown: string): Derived<T> {
  return { from, compute: compute, shown };
}

const MAX_TIMER_MS = 2 ** 31 - 1;
const DAY_MS = 24 * 3600_000;
const CENTURY_MS = 100 * 365 * DAY_MS;
const SSL_MODES = ['disabled', 'required', 'verify-ca', 'verify-identity'] as const;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const VARIABLES = {
  DATABASE_URL: setting(
    'database',
    'url',
    databaseUrl,
    'mysql://root@127.0.0.1:3306/punctual',
    'MySQL 8 / MariaDB 10.6+; the database is created if missing. Several hosts, comma-separated, for a Galera cluster or stand-bys: `mysql://user:password@db1:3306,db2:3306,db3:3306/punctual`',
  ),
  DATABASE_PASSWORD: orFile(
    optional(
      'database',
      'password',
      secret(),
      "the password of `DATABASE_URL`'s user, kept out of the URL; when set it is used instead of the URL's",
    ),
  ),
  DATABASE_SSL_MODE: setting(
    'database',
    'sslMode',
    oneOf(SSL_MODES),
    'disabled',
    "TLS to the database, as MySQL's client names the modes: `required` encrypts but verifies nothing (any certificate is taken: a man in the middle is not detected); `verify-ca` also checks the server's certificate against `DATABASE_SSL_CA` (or the system's CAs); `verify-identity` also checks that it names the host of `DATABASE_URL`. The same for every host of a multi-host URL (see [security](security.md))",
  ),
  DATABASE_SSL_CA: optional('database', 'sslCa', file, 'PEM file of the CA(s) the server certificate must be signed by'),
  DATABASE_SSL_CERT: optional('database', 'sslCert', file, 'PEM file of a client certificate, for a user that is `REQUIRE X509`'),
  DATABASE_SSL_KEY: optional('database', 'sslKey', file, 'PEM file of the key of `DATABASE_SSL_CERT`'),
  DB_WAIT_MS: setting(
    'database',
    'waitMs',
    milliseconds(0, 3600_000),
    30_000,
    'at start, how long to wait for a database that does not answer yet (a container started before its database), saying so every few seconds; then exit 1',
  ),
  DB_POOL_SIZE: setting(
    'database',
    'poolSize',
    integer(2, 1000),
    after('CONCURRENCY', (concurrency: number) => concurrency + 6, '`CONCURRENCY + 6`'),
    'MySQL connections; must exceed `CONCURRENCY`',
  ),
  LOCK_WAIT_TIMEOUT_S: setting(
    'database',
    'lockWaitTimeoutS',
    integer(1, 3600),
    5,
    "`innodb_lock_wait_timeout` of punctual's connections, in seconds",
  ),
  HOST: setting('http', 'host', text, '127.0.0.1', 'listen address; anything but loopback requires `API_TOKEN` (or a scoped token)'),
  PORT: setting('http', 'port', integer(0, 65535), 3000, 'listen port (`0`: any free port)'),
  API_TOKEN: orFile(
    optional(
      'http',
      'apiToken',
      secret(16),
      'bearer token for every task route; without it (and without scoped tokens) the API asks for no token and answers only to the loopback names, `HOST` and `ALLOWED_HOST_NAMES`',
    ),
  ),
  ALLOWED_HOST_NAMES: setting(
    'http',
    'allowedHostNames',
    hostNames,
    [],
    'comma-separated names the API answers to in the `Host` header when `API_TOKEN` is not set, besides `localhost`, `127.0.0.1`, `[::1]` and `HOST` (against DNS rebinding)',
  ),
  AUTH_FAILURES_PER_MINUTE: setting(
    'http',
    'authFailuresPerMinute',
    integer(1, 1_000_000),
    30,
    'requests with a missing or wrong token one client address may make per minute (on any route); then every request from it, the right token too, gets 429 until the minute is over (the public routes excepted)',
  ),
  REQUEST_TIMEOUT_MS: setting(
    'http',
    'requestTimeoutMs',
    milliseconds(1000, 3600_000),
    30_000,
    'a request (headers and body) must arrive whole within this, or its connection is closed',
  ),
  HEADERS_TIMEOUT_MS: setting(
    'http',
    'headersTimeoutMs',
    milliseconds(500, 3600_000),
    after('REQUEST_TIMEOUT_MS', (request: number) => Math.min(10_000, request), '`10000` (at most `REQUEST_TIMEOUT_MS`)'),
    "a request's headers must arrive within this",
  ),
  KEEP_ALIVE_TIMEOUT_MS: setting(
    'http',
    'keepAliveTimeoutMs',
    milliseconds(100, 3600_000),
    72_000,
    'an idle keep-alive connection is closed after this',
  ),
  EVENTS_REPLAY: setting(
    'http',
    'eventsReplay',
    integer(0, 1_000_000),
    10_000,
    '`GET /events`: how many runs (and as many changes) back a reconnect with `Last-Event-ID` may resume; further back starts there, after a `gap` event',
  ),
  EVENTS_POLL_MS: setting(
    'http',
    'eventsPollMs',
    milliseconds(50, 60_000),
    500,
    '`GET /events`: how often each stream reads the tables for what is new',
  ),
  EVENTS_STALL_MS: setting(
    'http',
    'eventsStallMs',
    milliseconds(1000, 600_000),
    30_000,
    '`GET /events`: a client that has read nothing of its full buffer for this long is dropped, with a `dropped` event (it resumes from its last id); until then its stream reads no further page',
  ),
  MAX_CONNECTIONS: setting('http', 'maxConnections', integer(1, 1_000_000), 1024, 'open connections at most; more are dropped at once'),
  API_TOKENS_READ: orFile(setting('roles', 'read', tokens, [], 'comma-separated tokens with the `read` role (lists, summary, metrics)')),
  API_TOKENS_WRITE: orFile(
    setting('roles', 'write', tokens, [], 'comma-separated tokens with the `write` role (also create, cancel, reschedule, retry)'),
  ),
  API_TOKENS_ADMIN: orFile(
    setting('roles', 'admin', tokens, [], 'comma-separated tokens with the `admin` role (also bulk changes, pauses, limits)'),
  ),
  API_TOKENS_WORKER: orFile(
    setting(
      'roles',
      'worker',
      tokens,
      [],
      'comma-separated tokens with the `worker` role (lease and settle tasks of worker types, nothing else)',
    ),
  ),
  API_TOKENS: orFile(
    setting(
      'roles',
      'named',
      namedTokens,
      [],
      'comma-separated `name:role:token` (role `read`, `write`, `admin` or `worker`): tokens with a name, which the audit trail records beside each change they make; the unnamed tokens are named `API_TOKEN`, `read-1`, `write-1`, …',
    ),
  ),
  TIMEZONE: setting('tasks', 'timezone', zone, 'UTC', 'IANA zone for a naive `runAt` when the request names none'),
  MAX_ATTEMPTS: setting('tasks', 'maxAttempts', integer(1, 1000), 4, 'attempts of a task that does not say'),
  HORIZON_MS: setting(
    'scheduler',
    'horizonMs',
    milliseconds(1000, MAX_TIMER_MS),
    10 * 60_000,
    'tasks due within this are armed; the rest wait in the table',
  ),
  REFILL_INTERVAL_MS: setting(
    'scheduler',
    'refillIntervalMs',
    milliseconds(10, 60_000),
    1000,
    'how often newly near and directly inserted tasks are armed',
  ),
  RECONCILE_INTERVAL_MS: setting(
    'scheduler',
    'reconcileIntervalMs',
    milliseconds(100, DAY_MS),
    60_000,
    'how often the full safety-net pass runs',
  ),
  MISFIRE_GRACE_MS: setting(
    'scheduler',
    'misfireGraceMs',
    milliseconds(0, MAX_TIMER_MS),
    60_000,
    'a task at most this late at boot is not a misfire (`skip` still runs it)',
  ),
  LOCK_AHEAD_MS: setting(
    'dispatcher',
    'lockAheadMs',
    autoOr(milliseconds(0, 1000)),
    'auto',
    "how long before its `runAt` a task's batch may claim and lock its rows; it commits at `runAt`, never before (`0`: at `runAt`; `auto`: two of the database's round trips and 2 ms, at most 50 ms)",
  ),
  CONCURRENCY: setting(
    'dispatcher',
    'concurrency',
    integer(1, 256),
    4,
    'database batches (and, separately, outside calls) running at once; one more for due tasks of a higher priority than all of them',
  ),
  BATCH_SIZE: setting('dispatcher', 'batchSize', integer(1, 1000), 200, 'most tasks claimed and completed in one transaction'),
  RUN_HISTORY: setting(
    'dispatcher',
    'runHistory',
    onOff,
    true,
    "`on`: every run of a task is on record (`GET /tasks/{id}/runs`), written in the transaction of its outcome: a successful one in its task's row, a failed or lost one in `punctual_task_runs`; `off`: only the latest run's fields, on the task",
  ),
  RETRY_BASE_MS: setting('retry', 'baseMs', milliseconds(1, MAX_TIMER_MS), 2000, 'first retry delay; doubles per attempt'),
  RETRY_MAX_MS: setting(
    'retry',
    'maxMs',
    milliseconds(1, MAX_TIMER_MS),
    3600_000,
    'longest retry delay (never shorter than `RETRY_BASE_MS`)',
  ),
  WEBHOOK_SECRET: orFile(optional('webhook', 'secret', secret(), 'HMAC key for webhook signatures; webhooks are off until it is set')),
  WEBHOOK_SECRET_NEXT: orFile(
    optional(
      'webhook',
      'nextSecret',
      secret(),
      'during a key rotation, the key that will replace `WEBHOOK_SECRET`: calls carry a signature with each',
    ),
  ),
  WEBHOOK_ALLOWED_HOSTS: setting(
    'webhook',
    'allowedHosts',
    hosts,
    [],
    'comma-separated `host` (any port) or `host:port` a webhook may call; an internal address only if listed as an address, and then only on the listed port if the entry has one',
  ),
  NOTIFY_URL: optional(
    'webhook',
    'notifyUrl',
    text,
    'where a task that fails for good is told: a `POST` of `{ event: "task.failed", at, task }`, sent once per failure as a `webhook` task (signed, retried up to `MAX_ATTEMPTS`); its host must be in `WEBHOOK_ALLOWED_HOSTS`, with `WEBHOOK_SECRET` or a host key',
  ),
  WEBHOOK_TIMEOUT_MS: setting('webhook', 'timeoutMs', milliseconds(100, 600_000), 10_000, 'time limit of one webhook call'),
  WEBHOOK_HOST_SECRETS: orFile(
    setting(
      'webhook',
      'hostSecrets',
      hostKeys,
      new Map(),
      "comma-separated `host=key` or `host:port=key`: a host's own signing key, used for it instead of `WEBHOOK_SECRET`; webhooks to it work even without `WEBHOOK_SECRET`",
    ),
  ),
  WEBHOOK_HOST_SECRETS_NEXT: orFile(
    setting('webhook', 'hostSecretsNext', hostKeys, new Map(), "the same form: during a rotation, the key that will replace a host's key"),
  ),
  WEBHOOK_TRUSTED_HOSTS: setting(
    'webhook',
    'trustedHosts',
    hosts,
    [],
    "`host` or `host:port` whose error answers may be quoted (200 characters) in `lastError`; any other host's give status and size only",
  ),
  RETENTION_MS: setting(
    'retention',
    'retentionMs',
    milliseconds(0, CENTURY_MS),
    7 * DAY_MS,
    '`done`, `cancelled` and `skipped` tasks are deleted this long after they finished; `0` keeps them',
  ),
  FAILED_RETENTION_MS: setting(
    'retention',
    'failedRetentionMs',
    milliseconds(0, CENTURY_MS),
    30 * DAY_MS,
    '`failed` tasks are deleted this long after they failed; `0` keeps them',
  ),
  AUDIT_RETENTION_MS: setting(
    'retention',
    'auditRetentionMs',
    milliseconds(0, CENTURY_MS),
    90 * DAY_MS,
    'audit trail entries (`GET /audit`) are deleted this long after they were written; `0` keeps them',
  ),
  RETENTION_INTERVAL_MS: setting('retention', 'intervalMs', milliseconds(1000, DAY_MS), 10 * 60_000, 'how often the retention sweep runs'),
  RETENTION_BATCH_SIZE: setting('retention', 'batchSize', integer(1, 10_000), 500, 'most rows one retention `DELETE` removes'),
  RETENTION_PAUSE_MS: setting('retention', 'pauseMs', milliseconds(0, 60_000), 200, 'pause between two retention `DELETE`s'),
  WORKER_TYPES: setting(
    'workers',
    'types',
    typeNames,
    [],
    'task types punctual never runs itself: it leases their due tasks to pull workers (`POST /workers/lease`); any JSON object is their payload',
  ),
  WORKER_MAX_WAITING: setting(
    'workers',
    'maxWaiting',
    integer(0, 100_000),
    500,
    'lease requests that may wait (long poll) at once in this process; one more is answered 503 at once. At most half of `MAX_CONNECTIONS` when `WORKER_TYPES` is set, so the waits never take the connections creates need',
  ),
  WORKER_MAX_WAITING_PER_TOKEN: setting(
    'workers',
    'maxWaitingPerToken',
    integer(1, 100_000),
    64,
    'lease requests of one token that may wait at once; one more is answered 503 at once, so one worker fleet cannot take every place',
  ),
  WORKER_MAX_LEASE_MS: setting(
    'workers',
    'maxLeaseMs',
    milliseconds(1000, 24 * 3600_000),
    3600_000,
    'the longest lease (`leaseMs`) a worker may ask for, at lease and at extend',
  ),
  TARGETS: orFile(
    setting(
      'targets',
      'list',
      targetList,
      [],
      'named broker targets for `publish` tasks: `orders=redis://127.0.0.1:6379#stream:orders`, `sale=amqp://user:pass@host:5672/vhost#exchange:shop/sale.start`, `audit=nats://127.0.0.1:4222#subject:shop.audit`',
    ),
  ),
  SHARDING: setting(
    'cluster',
    'sharding',
    onOff,
    false,
    '`on`: several processes share the tasks by shard leases, each arming and claiming only its own; `off`: every process arms every pending task within the horizon',
  ),
  LEASE_MS: setting(
    'cluster',
    'leaseMs',
    milliseconds(300, 600_000),
    5000,
    'with `SHARDING=on`: how long a shard lease lasts; renewed every third of it; a process that dies is replaced after about this long',
  ),
  HANDLERS: setting(
    'handlers',
    'modules',
    modulePaths,
    [],
    "comma-separated paths of handler modules, loaded before listening: each one's default export is an array of handlers (docs/handlers.md)",
  ),
  PROCEDURES: setting(
    'handlers',
    'procedures',
    procedureList,
    [],
    'comma-separated `type=procedure` or `type=schema.procedure`: each a task type whose run is `CALL procedure(…)` in the completion transaction; unqualified, the schema of `DATABASE_URL`',
  ),
  CLOSE_ORDER: setting(
    'handlers',
    'closeOrder',
    closeOrderMapping,
    DEFAULT_CLOSE_ORDER,
    "the shop's tables `close_order` works on, a JSON object: `table`, `key`, `status`, `unpaid`, `closed`, `closedAt` (null: not stamped), `stock` (null: no stock put back; else `items`, `itemGoods`, `itemNum`, `goods`, `goodsId`, `column`); each field defaults to the write-ups' `orders` and `goods`",
  ),
  STOP_TIMEOUT_MS: setting(
    'service',
    'stopTimeoutMs',
    milliseconds(0, 3600_000),
    10_000,
    'on SIGTERM, how long running handlers may take to finish',
  ),
  LOG_LEVEL: setting('service', 'logLevel', oneOf(LOG_LEVELS), 'info', 'how much the JSON log says'),
  TEST_CLOCK: setting(
    'service',
    'testClock',
    onOff,
    false,
    "`on`: for a shop's tests only (also `punctual start --test-clock`): time moves only through `POST /test/clock`, which runs what falls due; refused on a database holding tasks made without it (docs/testing-your-shop.md)",
  ),
} as const satisfies Record<string, Variable>;

export type VariableName = keyof typeof VARIABLES;
type Entry = (typeof VARIABLES)[VariableName];
type ValueOf<E> = E extends Variable<SliceName, string, infer T, infer Required> ? (Required extends true ? T : T | undefined) : never;

/** What the table reads: one object per slice, a field per variable. */
export type Settings = {
  [S in SliceName]: { [E in Entry as E extends { slice: S } ? E['key'] : never]: ValueOf<E> };
};

/** A check across variables, run once all are read: a message when it fails. */
export interface Rule {
  /** What it checks, for the docs. */
  readonly says: string;
  readonly check: (settings: Settings) => string | undefined;
}

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1';
  return false;
}

export const RULES: readonly Rule[] = [
  {
    says: 'each token in `API_TOKEN`, `API_TOKENS` and `API_TOKENS_*` appears once (one token, one role)',
    check({ http, roles }) {
      const seen = new Set(http.apiToken === undefined ? [] : [http.apiToken]);
      for (const role of ROLES) {
        for (const token of roles[role]) {
          if (seen.has(token)) return `a token in API_TOKENS_${role.toUpperCase()} is also given elsewhere: each token may appear once`;
          seen.add(token);
        }
      }
      for (const { name, token } of roles.named) {
        if (seen.has(token)) return `the token named ${name} in API_TOKENS is also given elsewhere: each token may appear once`;
        seen.add(token);
      }
      return undefined;
    },
  },
  {
    says: '`HOST` other than loopback needs `API_TOKEN` or a scoped token',
    check: ({ http, roles }) =>
      http.apiToken === undefined && ROLES.every((role) => roles[role].length === 0) && roles.named.length === 0 && !isLoopback(http.host)
        ? `HOST ${http.host} is reachable from other machines: set API_TOKEN, or listen on 127.0.0.1`
        : undefined,
  },
  {
    says: '`WORKER_TYPES` names none of the types punctual runs itself (`close_order`, `webhook`, `publish`)',
    check({ workers }) {
      const taken = workers.types.find((type) => ['close_order', 'webhook', 'publish'].includes(type));
      return taken === undefined
        ? undefined
        : `WORKER_TYPES names ${taken}, a type punctual runs itself: choose another name for the worker type`;
    },
  },
  {
    says: '`WORKER_MAX_WAITING` is at most half of `MAX_CONNECTIONS` when there are worker types',
    check: ({ workers, http }) =>
      workers.types.length > 0 && workers.maxWaiting > Math.floor(http.maxConnections / 2)
        ? `WORKER_MAX_WAITING (${workers.maxWaiting}) may be at most half of MAX_CONNECTIONS (${http.maxConnections}): waiting lease requests must never take the connections creates need; lower it or raise MAX_CONNECTIONS`
        : undefined,
  },
  {
    says: '`TEST_CLOCK=on` runs one process: `SHARDING` stays `off`',
    check: ({ service, cluster }) =>
      service.testClock && cluster.sharding
        ? 'TEST_CLOCK=on moves the time of one process: it cannot share a database with others (set SHARDING=off)'
        : undefined,
  },
  {
    says: '`DB_POOL_SIZE` is greater than `CONCURRENCY`',
    check: ({ database, dispatcher }) =>
      database.poolSize <= dispatcher.concurrency
        ? `DB_POOL_SIZE (${database.poolSize}) must be greater than CONCURRENCY (${dispatcher.concurrency}): requests and the refill need connections too`
        : undefined,
  },
  {
    says: '`HORIZON_MS` is longer than `REFILL_INTERVAL_MS`',
    check: ({ scheduler }) =>
      scheduler.horizonMs <= scheduler.refillIntervalMs
        ? `HORIZON_MS (${scheduler.horizonMs}) must be longer than REFILL_INTERVAL_MS (${scheduler.refillIntervalMs})`
        : undefined,
  },
  {
    says: '`NOTIFY_URL` is an http(s) URL on a host of `WEBHOOK_ALLOWED_HOSTS`, with `WEBHOOK_SECRET` or a key of its host',
    check({ webhook }) {
      if (webhook.notifyUrl === undefined) return undefined;
      let url: URL;
      try {
        url = new URL(webhook.notifyUrl);
      } catch {
        return 'NOTIFY_URL must be an http(s) URL';
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'NOTIFY_URL must be an http(s) URL';
      const port = url.port || (url.protocol === 'https:' ? '443' : '80');
      const allowed = webhook.allowedHosts.some((entry) => entry === url.hostname || entry === `${url.hostname}:${port}`);
      if (!allowed) return `NOTIFY_URL goes to ${url.hostname}, which is not in WEBHOOK_ALLOWED_HOSTS: list it there`;
      const keyed =
        webhook.secret !== undefined || webhook.hostSecrets.has(url.hostname) || webhook.hostSecrets.has(`${url.hostname}:${port}`);
      return keyed ? undefined : 'NOTIFY_URL needs WEBHOOK_SECRET (or a key of its host in WEBHOOK_HOST_SECRETS): the notices are signed';
    },
  },
  {
    says: '`WEBHOOK_SECRET_NEXT` comes with `WEBHOOK_SECRET`',
    check: ({ webhook }) =>
      webhook.nextSecret !== undefined && webhook.secret === undefined
        ? 'WEBHOOK_SECRET_NEXT is the key that will replace WEBHOOK_SECRET: set WEBHOOK_SECRET too'
        : undefined,
  },
  {
    says: 'every host in `WEBHOOK_HOST_SECRETS_NEXT` has a key in `WEBHOOK_HOST_SECRETS`',
    check({ webhook }) {
      const orphan = [...webhook.hostSecretsNext.keys()].find((host) => !webhook.hostSecrets.has(host));
      return orphan === undefined
        ? undefined
        : `WEBHOOK_HOST_SECRETS_NEXT names ${orphan}, which has no key in WEBHOOK_HOST_SECRETS to replace`;
    },
  },
  {
    says: '`DATABASE_SSL_CA`, `DATABASE_SSL_CERT` and `DATABASE_SSL_KEY` need a `DATABASE_SSL_MODE` other than `disabled`',
    check: ({ database }) =>
      database.sslMode === 'disabled' && (database.sslCa ?? database.sslCert ?? database.sslKey) !== undefined
        ? 'DATABASE_SSL_CA, DATABASE_SSL_CERT and DATABASE_SSL_KEY are for TLS: set DATABASE_SSL_MODE (required, verify-ca or verify-identity)'
        : undefined,
  },
  {
    says: '`DATABASE_SSL_CERT` and `DATABASE_SSL_KEY` come together',
    check: ({ database }) =>
      (database.sslCert === undefined) !== (database.sslKey === undefined)
        ? 'DATABASE_SSL_CERT and DATABASE_SSL_KEY are a client certificate and its key: set both or neither'
        : undefined,
  },
  {
    says: '`HEADERS_TIMEOUT_MS` is not longer than `REQUEST_TIMEOUT_MS`',
    check: ({ http }) =>
      http.headersTimeoutMs > http.requestTimeoutMs
        ? `HEADERS_TIMEOUT_MS (${http.headersTimeoutMs}) must not be longer than REQUEST_TIMEOUT_MS (${http.requestTimeoutMs})`
        : undefined,
  },
];
