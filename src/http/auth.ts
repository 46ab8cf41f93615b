/**
 * Bearer-token check for every route but the public ones (probes, API docs, the dashboard page).
 * Compared in constant time, on digests so the lengths leak nothing either.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.js';

const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/', '/favicon.ico']);

function isPublic(path: string): boolean {
  return PUBLIC_PATHS.has(path) || path === '/docs' || path.startsWith('/docs/') || path.startsWith('/ui/');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

export function installAuth(app: FastifyInstance, token: string | undefined): void {
  if (token === undefined) return;
  const expected = digest(`Bearer ${token}`);
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    if (isPublic(path)) return;
    const given = request.headers.authorization;
    if (given !== undefined && timingSafeEqual(digest(given), expected)) return;
    reply.header('www-authenticate', 'Bearer realm="punctual"');
    throw new HttpError(401, 'PUNCTUAL_UNAUTHORIZED', 'missing or wrong bearer token: send Authorization: Bearer <API_TOKEN>');
  });
}
