/**
 * Why punctual could not start, as one line that names the setting to change: an operator reads
 * "DATABASE_URL: …" or "PORT 3000 …" and knows where to look, where a stack trace of mysql2's
 * internals would tell them nothing. The stack is logged only at LOG_LEVEL=debug (main.ts).
 *
 * The database's own words are kept when they help (access denied for which user), credentials
 * are masked, a password or key never appears.
 */
import { redactCredentials } from '../observability/redact.js';
import { causeChain, rootMessage } from '../db/errors.js';
import type { Config } from './config.js';
import { MigrationNotPermitted, TableCollision } from '../db/migrate.js';
import { HandlerModuleError } from '../handlers/modules.js';
import { ProcedureError } from '../handlers/procedure.js';
import { TestClockRefused } from './test-clock.js';

/** No database answered within DB_WAIT_MS. */
export class DatabaseNotUp extends Error {
  override name = 'DatabaseNotUp';
}

interface Link {
  code?: string;
  errno?: number;
  message?: string;
  address?: string;
  port?: number;
  host?: string;
  cause?: unknown;
}

const chain = (error: unknown) => causeChain<Link>(error);

/** Certificate errors of the chain check: the CA does not vouch for the server's certificate. */
const CHAIN_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
]);

/** The database's address as DATABASE_URL names it (hosts only: no user, no password). */
function databaseAt(config: Config): string {
  try {
    const hostList = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?([^/?#]*)/i.exec(config.database.url)?.[1];
    return hostList ?? 'the database';
  } catch {
    return 'the database';
  }
}

/** The one line for `error`, naming the setting at fault. */
export function describeStartError(error: unknown, config: Config): string {
  const links = [...chain(error)];
  const find = (test: (link: Link) => boolean) => links.find(test);
  const { host, port } = config.http;
  const tls = config.database.sslMode;

  if (error instanceof DatabaseNotUp || error instanceof TableCollision || error instanceof MigrationNotPermitted)
    return `DATABASE_URL: ${redactCredentials(error.message)}`;
  if (error instanceof HandlerModuleError)
    return config.handlers.modules.includes(error.source) ? `HANDLERS: ${error.message}` : error.message;
  if (error instanceof ProcedureError) return redactCredentials(error.message);
  if (error instanceof TestClockRefused) return redactCredentials(error.message);
  const listen = find((link) => ['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL'].includes(link.code ?? '') && link.address !== undefined);
  if (listen?.code === 'EADDRINUSE') return `PORT ${port} on ${host} is already in use by another process: choose another PORT`;
  if (listen?.code === 'EACCES') return `PORT ${port} on ${host}: permission denied (a port below 1024 needs privileges)`;
  if (listen?.code === 'EADDRNOTAVAIL') return `HOST ${host} is not an address of this machine`;

  const denied = find((link) => link.errno === 1045 || link.code === 'ER_ACCESS_DENIED_ERROR');
  if (denied !== undefined) {
    const hint =
      tls === 'disabled'
        ? 'wrong user or password (DATABASE_URL or DATABASE_PASSWORD), or the user requires TLS (set DATABASE_SSL_MODE)'
        : 'wrong user or password (DATABASE_URL or DATABASE_PASSWORD)';
    return `DATABASE_URL: the database refused the login: ${redactCredentials(denied.message ?? '')} — ${hint}`;
  }
  const database = find((link) => link.errno === 1044 || link.code === 'ER_DBACCESS_DENIED_ERROR');
  if (database !== undefined) return `DATABASE_URL: ${redactCredentials(database.message ?? '')} — grant the user the database`;

  const name = find((link) => link.code === 'ERR_TLS_CERT_ALTNAME_INVALID');
  if (name !== undefined) {
    return `DATABASE_SSL_MODE=verify-identity: the database's certificate does not name the host connected to (${name.message ?? ''}); use the name the certificate holds in DATABASE_URL, or verify-ca`;
  }
  // mysql2 replaces the code of a failed TLS handshake with its own: read Node's words then.
  const chained = find(
    (link) =>
      CHAIN_CODES.has(link.code ?? '') ||
      (link.code === 'HANDSHAKE_SSL_ERROR' && /certificate|self.signed|issuer|verify/i.test(link.message ?? '')),
  );
  if (chained !== undefined) {
    const which =
      config.database.sslCa === undefined ? 'the system CAs (set DATABASE_SSL_CA)' : `DATABASE_SSL_CA (${config.database.sslCa.path})`;
    return `DATABASE_SSL_CA: the database's certificate is not vouched for by ${which}: ${chained.code === 'HANDSHAKE_SSL_ERROR' ? chained.message : chained.code}`;
  }
  const noTls = find((link) => link.code === 'HANDSHAKE_NO_SSL_SUPPORT');
  if (noTls !== undefined) return `DATABASE_SSL_MODE=${tls}: the database at ${databaseAt(config)} does not offer TLS`;
  const pem = find((link) => (link.code ?? '').startsWith('ERR_OSSL'));
  if (pem !== undefined) {
    return `DATABASE_SSL_CA, DATABASE_SSL_CERT or DATABASE_SSL_KEY: a file is not a PEM certificate or key, or the key does not fit the certificate (${pem.code})`;
  }
  const unknownHost = find((link) => link.code === 'ENOTFOUND' || link.code === 'EAI_AGAIN');
  if (unknownHost !== undefined)
    return `DATABASE_URL: the database host ${unknownHost.host ?? databaseAt(config)} is not known (${unknownHost.code})`;
  const code = links.map((link) => link.code).find((c) => c !== undefined);
  return `${redactCredentials(rootMessage(error))}${code === undefined ? '' : ` (${code})`}`;
}

/** Errors of a database that is not up yet (starting, or its name not in DNS yet): worth waiting for. */
const NOT_UP_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST',
  'ER_SERVER_SHUTDOWN',
]);

export function isDatabaseNotUp(error: unknown): boolean {
  return [...chain(error)].some((link) => NOT_UP_CODES.has(link.code ?? '') || link.errno === 1047);
}

export interface WaitOptions {
  waitMs: number;
  /** Told every few seconds while waiting. */
  onWait: (waitedMs: number, reason: string) => void;
  /** True once the wait should end (a stop while booting). */
  stopped: () => boolean;
  everyMs?: number;
  retryMs?: number;
}

/**
 * `attempt` until it succeeds or fails with anything but "not up yet"; after `waitMs` of "not up
 * yet", a DatabaseNotUp naming the last reason.
 */
export async function waitForDatabase<T>(attempt: () => Promise<T>, options: WaitOptions): Promise<T> {
  const { waitMs, everyMs = 3000, retryMs = 500 } = options;
  const started = performance.now();
  let told = started;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const waited = performance.now() - started;
      if (!isDatabaseNotUp(error) || options.stopped()) throw error;
      const reason = [...chain(error)].map((link) => link.code).find((code) => code !== undefined) ?? 'no answer';
      if (waited >= waitMs) {
        throw new DatabaseNotUp(`no database answered within DB_WAIT_MS (${waitMs} ms): ${reason}`, { cause: error });
      }
      if (performance.now() - told >= everyMs) {
        told = performance.now();
        options.onWait(Math.round(waited), reason);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(retryMs, waitMs - waited)));
    }
  }
}
