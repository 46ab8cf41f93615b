/**
 * Sorting database errors by what to do about them. drizzle wraps driver errors
 * (DrizzleQueryError with the driver's error as `cause`), so every check walks the cause chain.
 */
import { redactCredentials } from '../observability/redact.js';

interface DriverError {
  code?: string;
  errno?: number;
  fatal?: boolean;
  message?: string;
  cause?: unknown;
}

/** An error and its causes, outermost first (at most 8 deep: a cycle of causes must end). */
export function* causeChain<T extends { cause?: unknown } = DriverError>(error: unknown): Generator<T> {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current !== null && typeof current === 'object'; depth++) {
    yield current as T;
    current = (current as T).cause;
  }
}

const chain = (error: unknown) => causeChain<DriverError>(error);

const CONNECTION_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'PROTOCOL_ENQUEUE_AFTER_QUIT',
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ER_SERVER_SHUTDOWN',
  'ER_CON_COUNT_ERROR',
  'ER_CONNECTION_KILLED',
  'ER_QUERY_INTERRUPTED',
  'ER_NET_READ_ERROR',
  'ER_NET_READ_INTERRUPTED',
  'ER_NET_ERROR_ON_WRITE',
  'ER_NET_WRITE_INTERRUPTED',
  'ER_CLIENT_INTERACTION_TIMEOUT',
]);

const CONNECTION_MESSAGES = ['Pool is closed', 'closed state', 'Connection lost', 'connect ETIMEDOUT', 'gone away', 'Lost connection'];

/**
 * The connection broke or could not be made: the statement's outcome may be unknown, the
 * connection must not be reused, and the work should be tried again once the database answers.
 */
export function isConnectionError(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link.fatal === true) return true;
    if (link.code !== undefined && CONNECTION_CODES.has(link.code)) return true;
    if (link.errno === 2006 || link.errno === 2013) return true;
    // A Galera node outside the primary component: the work can go to another node.
    if (link.errno === 1047 || link.code === 'ER_UNKNOWN_COM_ERROR') return true;
    const message = link.message ?? '';
    if (CONNECTION_MESSAGES.some((fragment) => message.includes(fragment))) return true;
  }
  return false;
}

/** Errors of transactions whose connection broke before their COMMIT was sent (transaction.ts). */
const lostBeforeCommit = new WeakSet<object>();

/**
 * Marks `error`, met by a transaction before its COMMIT went out, when it is a broken connection
 * (not a statement cut by its own time limit): nothing of the transaction was committed, so it
 * may run again from the start on another connection.
 */
export function markIfLostBeforeCommit(error: unknown): void {
  if (typeof error !== 'object' || error === null || !isConnectionError(error)) return;
  for (const link of chain(error)) if (link.code === 'ER_QUERY_INTERRUPTED') return;
  lostBeforeCommit.add(error);
}

/** A transaction's connection broke before its COMMIT went out: running it again cannot do it twice. */
export function isLostBeforeCommit(error: unknown): boolean {
  return typeof error === 'object' && error !== null && lostBeforeCommit.has(error);
}

/**
 * A Galera node that is not part of the primary component (or still joining) refuses statements
 * with 1047 "WSREP has not yet prepared node for application use": use another node.
 */
export function isNodeNotReady(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link.errno === 1047 || link.code === 'ER_UNKNOWN_COM_ERROR') return true;
  }
  return false;
}

/**
 * A deadlock (1213) or a lock wait timeout (1205): retry the transaction, it is nobody's fault.
 * On a Galera cluster a write conflict with another node's transaction shows up as 1213 too, at
 * any statement or at COMMIT (certification failure, "WSREP detected deadlock/conflict and
 * aborted the transaction"): the transaction was rolled back whole, so trying it again is safe.
 */
export function isLockConflict(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link.errno === 1213 || link.errno === 1205) return true;
    if (link.code === 'ER_LOCK_DEADLOCK' || link.code === 'ER_LOCK_WAIT_TIMEOUT') return true;
    if (typeof link.message === 'string' && link.message.includes('WSREP detected deadlock/conflict')) return true;
  }
  return false;
}

/** Table exists, duplicate column, duplicate key name, duplicate foreign key, duplicate entry. */
const RAN_ELSEWHERE = new Set([1050, 1060, 1061, 1826, 1062]);

/**
 * A migration's statement found its work done already: another process migrating at once (on
 * another Galera node, where GET_LOCK does not reach) ran it first.
 */
export function isRanElsewhere(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link.errno !== undefined && RAN_ELSEWHERE.has(link.errno)) return true;
  }
  return false;
}

/** The table named does not exist (1146). */
export function isNoSuchTable(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link.errno === 1146 || link.code === 'ER_NO_SUCH_TABLE') return true;
  }
  return false;
}

export function isDuplicateKey(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link.errno === 1062 || link.code === 'ER_DUP_ENTRY') return true;
  }
  return false;
}

/**
 * Errors of the schema or the grants that no retry fixes: an unknown column, table, database or
 * procedure, a procedure called with the wrong number of arguments, a statement that does not
 * parse, access denied to a table, column, database or procedure.
 */
const SCHEMA_OR_GRANT = new Set([1049, 1051, 1054, 1064, 1109, 1146, 1305, 1318, 1356, 1044, 1142, 1143, 1370]);

/** The server's message and code when `error` is one of the schema or the grants (SCHEMA_OR_GRANT), else undefined. */
export function schemaOrGrantError(error: unknown): string | undefined {
  for (const link of chain(error)) {
    if (link.errno !== undefined && SCHEMA_OR_GRANT.has(link.errno))
      return `${(link as { sqlMessage?: string }).sqlMessage ?? link.message ?? ''} (${link.code ?? link.errno})`;
  }
  return undefined;
}

/** The server answered the statement with an error of its own (an errno), not a lost connection or a lock conflict. */
export function refusedByServer(error: unknown): boolean {
  if (isConnectionError(error) || isLockConflict(error)) return false;
  for (const link of chain(error)) if (link.errno !== undefined) return true;
  return false;
}

/** The error's message, looking through drizzle's "Failed query: <sql> params: <values>" wrapper. */
export function rootMessage(error: unknown): string {
  for (const link of chain(error)) {
    const message = typeof link.message === 'string' ? link.message : '';
    if (!message.startsWith('Failed query:')) return message !== '' ? message : String(error);
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * An error as the log should see it: the driver's message, code and stack, never drizzle's
 * wrapper, whose message carries the statement's parameters (payloads, webhook headers).
 */
export function loggable(error: unknown): { message: string; code?: string; errno?: number; stack?: string } {
  const root = [...chain(error)].find((link) => !String(link.message ?? '').startsWith('Failed query:'));
  const stack = root instanceof Error && root.stack !== undefined ? redactCredentials(root.stack) : undefined;
  return { message: redactCredentials(rootMessage(error)), code: root?.code, errno: root?.errno, stack };
}
