/**
 * Bearer-token check for every route but the public ones (probes, API docs, the dashboard page).
 * Which token has which role, and which role each route needs, is roles.ts's business: this
 * file reads the header, answers 401 for no or an unknown token and 403 for too small a role.
 */
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.js';
import { allows, roleFor, type Role, type TokenRoles } from './roles.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's role, once the token is checked (admin when the API has no tokens). */
    role?: Role;
  }
}

const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/', '/favicon.ico']);

function isPublic(path: string): boolean {
  return PUBLIC_PATHS.has(path) || path === '/docs' || path.startsWith('/docs/') || path.startsWith('/ui/');
}

export function installAuth(app: FastifyInstance, tokens: TokenRoles): void {
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
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    if (isPublic(path)) return;
    const given = request.headers.authorization;
    const role = given !== undefined && given.startsWith('Bearer ') ? tokens.roleOf(given.slice(7)) : undefined;
    if (role === undefined) {
      reply.header('www-authenticate', 'Bearer realm="punctual"');
      throw new HttpError(401, 'PUNCTUAL_UNAUTHORIZED', 'missing or wrong bearer token: send Authorization: Bearer <API_TOKEN>');
    }
    request.role = role;
    // An unknown route needs only a valid token, then answers 404.
    const needed = request.routeOptions.url === undefined ? 'read' : (roleFor(request.method, request.routeOptions.url) ?? 'admin');
    if (!allows(role, needed)) {
      throw new HttpError(403, 'PUNCTUAL_FORBIDDEN', `this route needs a token with the ${needed} role; this token has the ${role} role`);
    }
  });
}
