/**
 * Bearer-token check for every route but the public ones (probes, API docs, the dashboard page).
 * Compared in constant time, on digests so the lengths leak nothing either. The scheme name is
 * case-insensitive (RFC 7235); the token is not.
 *
 * A client address that keeps sending wrong tokens is slowed down: after AUTH_FAILURES_PER_MINUTE
 * refusals in a minute it gets 429 until the minute is over, so a token cannot be guessed at line
 * speed. Requests with the right token are never counted or held back, so a shop behind the same
 * address as a guesser keeps working.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';

const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/', '/favicon.ico']);

export function isPublic(path: string): boolean {
  return PUBLIC_PATHS.has(path) || path === '/docs' || path.startsWith('/docs/') || path.startsWith('/ui/');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The credential of `Authorization: Bearer <credential>`, any case of "Bearer", or undefined. */
export function bearerCredential(header: string | undefined): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(header ?? '');
  return match?.[1];
}

export interface AuthOptions {
  token: string | undefined;
  /** Refused requests one client address may make per minute before it gets 429. */
  failuresPerMinute: number;
}

export function installAuth(app: FastifyInstance, { token, failuresPerMinute }: AuthOptions): void {
  if (token === undefined) return;
  const expected = digest(token);
  const authorized = (request: FastifyRequest): boolean => {
    const path = request.url.split('?', 1)[0] ?? '';
    if (isPublic(path)) return true;
    const given = bearerCredential(request.headers.authorization);
    return given !== undefined && timingSafeEqual(digest(given), expected);
  };

  // Registered before the routes, so its hook runs first: only refused requests are counted.
  void app.register(rateLimit, {
    max: failuresPerMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => request.ip,
    allowList: (request) => authorized(request),
    errorResponseBuilder: (_request, context) =>
      new HttpError(429, 'PUNCTUAL_TOO_MANY_AUTH_FAILURES', `too many requests with a wrong token; try again in ${context.after}`),
  });

  // preParsing: after the limiter's onRequest hook (route hooks run after the app's), before any body is read.
  app.addHook('preParsing', async (request, reply) => {
    if (authorized(request)) return;
    reply.header('www-authenticate', 'Bearer realm="punctual"');
    throw new HttpError(401, 'PUNCTUAL_UNAUTHORIZED', 'missing or wrong bearer token: send Authorization: Bearer <API_TOKEN>');
  });
}
