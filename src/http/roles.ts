/**
 * Who may call what. A token has one role; the roles (src/contract/auth.ts) are ordered, each
 * allowing what the one below it allows: `read` (lists, summary, metrics: what the dashboard
 * shows) < `write` (create, cancel, reschedule, retry) < `admin` (bulk changes, pauses, limits).
 * API_TOKEN may do everything, so it has the highest role. `worker` stands apart: it may lease and
 * settle worker types' tasks (pull workers), nothing else; admin may do that too.
 *
 * ROUTE_ROLES is the one table from route to role. A route missing from it (and not public)
 * stops the app from starting, so no route ships open by accident: a new route adds its line.
 *
 * Tokens are compared on SHA-256 digests with timingSafeEqual, against every known token each
 * time (no early exit), so neither a token's length nor which role matched shows in the timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { ROLES, type Role } from '../contract/auth.js';

/** `METHOD route pattern` (as Fastify registers it) → the least role that may call it. */
export const ROUTE_ROLES: Readonly<Record<string, Role>> = {
  'GET /auth/whoami': 'read',
  'GET /audit': 'admin',
  'GET /events': 'read',
  'GET /charts/upcoming': 'read',
  'GET /charts/recent': 'read',
  'GET /cluster': 'read',
  'GET /metrics': 'read',
  'GET /tasks/pending': 'read',
  'GET /tasks/recent': 'read',
  'GET /tasks/summary': 'read',
  'GET /tasks/:id': 'read',
  'GET /tasks/:id/runs': 'read',
  'GET /tasks/by-key/:key': 'read',
  'POST /tasks': 'write',
  'POST /tasks/:id/cancel': 'write',
  'POST /tasks/:id/reschedule': 'write',
  'POST /tasks/:id/retry': 'write',
  'POST /tasks/:id/release-lease': 'admin',
  'PUT /tasks/:id/payload': 'write',
  'DELETE /tasks/:id': 'write',
  'GET /runs/last-hour': 'read',
  'POST /tasks/by-key/:key/cancel': 'write',
  'GET /types': 'read',
  'PUT /types/:type/limits': 'admin',
  'POST /types/:type/pause': 'admin',
  'POST /types/:type/resume': 'admin',
  'POST /tasks/batch': 'write',
  'POST /tasks/bulk/cancel': 'admin',
  'POST /tasks/bulk/reschedule': 'admin',
  'POST /tasks/bulk/retry': 'admin',
  'POST /tasks/bulk/delete': 'admin',
  'GET /tasks': 'read',
  'GET /tasks/counts': 'read',
  'GET /tasks/search': 'read',
  'GET /workers': 'read',
  'POST /workers/lease': 'worker',
  'POST /tasks/:id/ack': 'worker',
  'POST /workers/ack': 'worker',
  'POST /tasks/:id/nack': 'worker',
  'POST /tasks/:id/extend': 'worker',
  'GET /test/clock': 'read',
  'POST /test/clock': 'write',
};

/** The role a route needs; undefined when it is not in the table. */
export function roleFor(method: string, url: string): Role | undefined {
  // HEAD is answered by the GET route.
  return ROUTE_ROLES[`${method === 'HEAD' ? 'GET' : method} ${url}`];
}

/** The ordered roles, each allowing what the one before allows; `worker` is not among them. */
const LADDER: readonly Role[] = ['read', 'write', 'admin'];

/** Does `role` allow what `needed` allows? A worker token does worker routes only; admin does them too. */
export function allows(role: Role, needed: Role): boolean {
  if (role === 'worker' || needed === 'worker') return role === needed || role === 'admin';
  return LADDER.indexOf(role) >= LADDER.indexOf(needed);
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Who a token is: its role, and the name the audit trail records for it. */
export interface TokenIdentity {
  role: Role;
  name: string;
}

/** The tokens of each role (API_TOKENS_READ, …), and the named ones (API_TOKENS). */
export type ScopedTokens = Partial<Record<Role, readonly string[]>> & {
  named?: readonly { name: string; role: Role; token: string }[];
};

/** The name of API_TOKEN, and of an unnamed scoped token: `read-1`, `write-2`, … by position. */
export const FULL_TOKEN_NAME = 'API_TOKEN';

export class TokenRoles {
  readonly #known: { digest: Buffer; identity: TokenIdentity }[] = [];

  /** `full` is API_TOKEN (every role); `scoped` the tokens of each role, and the named ones. */
  constructor(full: string | undefined, scoped: ScopedTokens = {}) {
    if (full !== undefined) this.#known.push({ digest: digest(full), identity: { role: 'admin', name: FULL_TOKEN_NAME } });
    for (const role of ROLES) {
      (scoped[role] ?? []).forEach((token, i) => this.#known.push({ digest: digest(token), identity: { role, name: `${role}-${i + 1}` } }));
    }
    for (const { name, role, token } of scoped.named ?? []) this.#known.push({ digest: digest(token), identity: { role, name } });
  }

  /** False when no token is configured: the API is open (on loopback only, config sees to it). */
  get enabled(): boolean {
    return this.#known.length > 0;
  }

  /** The role of `token`, or undefined for an unknown one. */
  roleOf(token: string): Role | undefined {
    return this.identify(token)?.role;
  }

  /** Who `token` is, or undefined for an unknown one. */
  identify(token: string): TokenIdentity | undefined {
    const given = digest(token);
    let found: TokenIdentity | undefined;
    for (const known of this.#known) {
      if (timingSafeEqual(given, known.digest)) found = known.identity;
    }
    return found;
  }
}
