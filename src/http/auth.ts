/**
 * Bearer-token check for every route but the public ones (probes, API docs, the dashboard page).
 * Which token has which role, and which role each route needs, is roles.ts's business: this
 * file reads the header, answers 401 for no or an unknown token and 403 for too small a role.
 * The scheme name is case-insensitive (RFC 7235); the token is not.
 *
 * A client address that keeps sending wrong tokens is stopped: every 401 counts against the
 * address (on any route, known or not, and any method), and once it has had
 * AUTH_FAILURES_PER_MINUTE of them in the minute, every request from it gets 429 until the minute
 * is over, **before the token is looked at**. The right token is held back too: were it let
 * through, 200 against 429 would still tell each guess apart, and the guessing would go on at
 * line speed. For the same reason an unknown route answers 401 to a wrong token (counted) and
 * 404 only after a valid one.
 *
 * The public routes stay reachable from a limited address: they tell nothing about a token, and
 * a liveness probe locked out by a guesser on the same address (a shared NAT, a sidecar) would
 * have a healthy service restarted. Probes usually come from elsewhere; this keeps them working
 * when they do not. Clients behind one address share its budget: docs/security.md says what a
 * shop can do about it.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';
import type { Role } from '../contract/auth.js';
import { allows, roleFor, type TokenRoles } from './roles.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's role, once the token is checked (admin when the API has no tokens). */
    role?: Role;
    /** The name of the caller's token (API_TOKENS, or `API_TOKEN`, `read-1`, …); `open` when the API has no tokens. */
    tokenName?: string;
    /** The tasks a create replaced (onKeyConflict: replace): a change to existing tasks, audited (http/audit.ts). */
    replaced?: number[];
  }
}

/** Who made a change when the API asks for no token (loopback only). */
export const OPEN_NAME = 'open';

const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/', '/favicon.ico']);

export function isPublic(path: string): boolean {
  return (
    PUBLIC_PATHS.has(path) ||
    path === '/docs' ||
    path.startsWith('/docs/') ||
    path.startsWith('/ui/') ||
    path === '/console' ||
    path.startsWith('/console/')
  );
}

/** The credential of `Authorization: Bearer <credential>`, any case of "Bearer", or undefined. */
export function bearerCredential(header: string | undefined): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(header ?? '');
  return match?.[1];
}

export interface AuthOptions {
  tokens: TokenRoles;
  /** Refused requests one client address may make per minute before it gets 429. */
  failuresPerMinute: number;
}

export function installAuth(app: FastifyInstance, { tokens, failuresPerMinute }: AuthOptions): void {
  // Every route is public or in the role table; a route in neither stops the start.
  const unlisted: string[] = [];
  app.addHook('onRoute', (route) => {
    if (isPublic(route.url)) return;
    for (const method of [route.method].flat()) {
      if (roleFor(method, route.url) === undefined) unlisted.push(`${method} ${route.url}`);
    }
  });
  app.addHook('onReady', async () => {
    if (unlisted.length > 0) throw new Error(`routes without a role in ROUTE_ROLES (src/http/roles.ts): ${unlisted.join(', ')}`);
  });

  app.decorateRequest('role', undefined);
  app.decorateRequest('tokenName', undefined);
  if (!tokens.enabled) {
    app.addHook('onRequest', async (request) => {
      request.role = 'admin';
      request.tokenName = OPEN_NAME;
    });
    return;
  }

  const publicPath = (request: FastifyRequest) => isPublic(request.url.split('?', 1)[0] ?? '');
  void app.register(rateLimit, {
    global: false,
    max: failuresPerMinute,
    timeWindow: 60_000,
  });
  app.after(() => {
    // The default key is the client address (an IPv6 address by its /56 subnet, as one host
    // usually holds a whole block of them).
    const failures = app.createRateLimit();
    // onRequest: before the token is read, and for unknown routes and methods too (the 404 handler runs the app's hooks).
    app.addHook('onRequest', async (request, reply) => {
      if (publicPath(request)) return;
      const spent = await failures(request, { increment: false });
      if (!spent.isAllowed && spent.remaining === 0) {
        reply.header('retry-after', String(spent.ttlInSeconds));
        throw new HttpError(
          429,
          'PUNCTUAL_TOO_MANY_AUTH_FAILURES',
          `too many requests with a wrong token from this address; every request from it is refused for ${spent.ttlInSeconds} s`,
        );
      }
    });
    app.addHook('preParsing', async (request, reply) => {
      if (publicPath(request)) return;
      const given = bearerCredential(request.headers.authorization);
      const identity = given === undefined ? undefined : tokens.identify(given);
      const role = identity?.role;
      request.role = role;
      request.tokenName = identity?.name;
      if (role === undefined) {
        await failures(request);
        reply.header('www-authenticate', 'Bearer realm="punctual"');
        throw new HttpError(401, 'PUNCTUAL_UNAUTHORIZED', 'missing or wrong bearer token: send Authorization: Bearer <API_TOKEN>');
      }
      // An unknown route needs only a valid token, then answers 404.
      const needed = request.routeOptions.url === undefined ? 'read' : (roleFor(request.method, request.routeOptions.url) ?? 'admin');
      if (!allows(role, needed)) {
        throw new HttpError(403, 'PUNCTUAL_FORBIDDEN', `this route needs a token with the ${needed} role; this token has the ${role} role`);
      }
    });
  });
}
