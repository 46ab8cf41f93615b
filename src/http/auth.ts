/**
 * Bearer-token check for every route but the public ones (probes, API docs, the dashboard page).
 * Which token has which role, and which role each route needs, is roles.ts's business: this
 * file reads the header, answers 401 for no or an unknown token and 403 for too small a role.
 * The scheme name is case-insensitive (RFC 7235); the token is not.
 *
 * A client address that keeps sending wrong tokens is slowed down: after AUTH_FAILURES_PER_MINUTE
 * refusals in a minute it gets 429 until the minute is over, so a token cannot be guessed at line
 * speed. Requests with a known token are never counted or held back, so a shop behind the same
 * address as a guesser keeps working.
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
  }
}

const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/', '/favicon.ico']);

export function isPublic(path: string): boolean {
  return PUBLIC_PATHS.has(path) || path === '/docs' || path.startsWith('/docs/') || path.startsWith('/ui/');
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
  if (!tokens.enabled) {
    app.addHook('onRequest', async (request) => {
      request.role = 'admin';
    });
    return;
  }

  const publicPath = (request: FastifyRequest) => isPublic(request.url.split('?', 1)[0] ?? '');
  /** The token's role, read once per request (the limiter asks first, the check below reuses it). */
  const roleOf = (request: FastifyRequest): Role | undefined => {
    if (request.role === undefined) {
      const given = bearerCredential(request.headers.authorization);
      request.role = given === undefined ? undefined : tokens.roleOf(given);
    }
    return request.role;
  };

  // Registered before the routes, so its hook runs first: only refused requests are counted.
  void app.register(rateLimit, {
    max: failuresPerMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => request.ip,
    allowList: (request) => publicPath(request) || roleOf(request) !== undefined,
    errorResponseBuilder: (_request, context) =>
      new HttpError(429, 'PUNCTUAL_TOO_MANY_AUTH_FAILURES', `too many requests with a wrong token; try again in ${context.after}`),
  });

  // preParsing: after the limiter's onRequest hook (route hooks run after the app's), before any body is read.
  app.addHook('preParsing', async (request, reply) => {
    if (publicPath(request)) return;
    const role = roleOf(request);
    if (role === undefined) {
      reply.header('www-authenticate', 'Bearer realm="punctual"');
      throw new HttpError(401, 'PUNCTUAL_UNAUTHORIZED', 'missing or wrong bearer token: send Authorization: Bearer <API_TOKEN>');
    }
    // An unknown route needs only a valid token, then answers 404.
    const needed = request.routeOptions.url === undefined ? 'read' : (roleFor(request.method, request.routeOptions.url) ?? 'admin');
    if (!allows(role, needed)) {
      throw new HttpError(403, 'PUNCTUAL_FORBIDDEN', `this route needs a token with the ${needed} role; this token has the ${role} role`);
    }
  });
}
