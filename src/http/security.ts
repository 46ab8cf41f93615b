/**
 * What the HTTP side does against a hostile caller, in one place: the server's timeouts and
 * connection cap, the browser-facing headers, and the checks that keep a web page the operator
 * happens to visit from using the API through the operator's browser.
 *
 * - Slow clients: a request must arrive whole within REQUEST_TIMEOUT_MS (its headers within
 *   HEADERS_TIMEOUT_MS), an idle keep-alive connection is closed after KEEP_ALIVE_TIMEOUT_MS, and
 *   at most MAX_CONNECTIONS sockets are open. Node checks the request deadlines every second.
 * - Cross-site requests: a state-changing request (POST, PUT, PATCH, DELETE) whose
 *   `Sec-Fetch-Site` or `Origin` says it comes from another site is refused (403), and its body,
 *   if any, must be `application/json` (415). A browser cannot send a cross-site JSON body
 *   without a CORS preflight, which punctual never grants.
 * - DNS rebinding: without API_TOKEN the API is open to whatever reaches it, so the `Host` header
 *   must name loopback, HOST or one of ALLOWED_HOST_NAMES (403 otherwise): a page whose own name
 *   was re-pointed at 127.0.0.1 sends its own name. With a token, the token is the check.
 * - Headers: `@fastify/helmet` on every answer, with a Content-Security-Policy that lets a page
 *   load scripts, styles and data from its own origin only, and never be framed.
 */
import helmet from '@fastify/helmet';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { HttpError } from './errors.js';

export interface SecurityOptions {
  /** HOST: the listen address, always a name the API answers to. */
  host: string;
  /** API_TOKEN is set: the token guards the API, the Host check is not needed. */
  tokenSet: boolean;
  allowedHostNames: string[];
  authFailuresPerMinute: number;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
}

/** The configuration's HTTP settings, as the security options need them. */
export function securityOptions(http: Omit<SecurityOptions, 'tokenSet'> & { apiToken: string | undefined }): SecurityOptions {
  return {
    host: http.host,
    tokenSet: http.apiToken !== undefined,
    allowedHostNames: http.allowedHostNames,
    authFailuresPerMinute: http.authFailuresPerMinute,
    requestTimeoutMs: http.requestTimeoutMs,
    headersTimeoutMs: http.headersTimeoutMs,
    keepAliveTimeoutMs: http.keepAliveTimeoutMs,
    maxConnections: http.maxConnections,
  };
}

/** How often Node looks for requests past their deadline (its default, 30 s, would let a slow body live that much longer). */
const DEADLINE_CHECK_MS = 1000;

/** The Fastify server options for the timeouts. */
export function serverOptions(options: SecurityOptions): Partial<FastifyServerOptions> {
  return {
    requestTimeout: options.requestTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    // A socket with no traffic at all: longer than any request or keep-alive pause may take.
    connectionTimeout: Math.max(options.requestTimeoutMs, options.keepAliveTimeoutMs) + 5000,
    http: {
      requestTimeout: options.requestTimeoutMs,
      headersTimeout: options.headersTimeoutMs,
      connectionsCheckingInterval: DEADLINE_CHECK_MS,
    },
  } as Partial<FastifyServerOptions>;
}

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** `host[:port]` → host, lower case, IPv6 kept in brackets, a trailing dot dropped. */
function hostnameOf(header: string): string {
  const host = header.trim().toLowerCase();
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
  return name.replace(/\.$/, '');
}

function bracketed(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

function forbidden(code: string, message: string): HttpError {
  return new HttpError(403, code, message);
}

/** Refuses cross-site state changes, non-JSON bodies and, without a token, foreign Host names. */
export function installRequestGuard(app: FastifyInstance, options: SecurityOptions): void {
  const hostNames = new Set(['localhost', '127.0.0.1', '[::1]', bracketed(options.host.toLowerCase()), ...options.allowedHostNames]);
  app.server.maxConnections = options.maxConnections;

  app.addHook('onRequest', async (request) => {
    const { headers } = request;
    if (!options.tokenSet && headers.host !== undefined && !hostNames.has(hostnameOf(headers.host))) {
      throw forbidden(
        'PUNCTUAL_HOST_NOT_ALLOWED',
        `Host ${JSON.stringify(headers.host)} is not a name of this service: without API_TOKEN only loopback, HOST and ALLOWED_HOST_NAMES are answered`,
      );
    }
    if (!UNSAFE_METHODS.has(request.method)) return;
    const site = headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      throw forbidden('PUNCTUAL_CROSS_SITE', `a ${site} request may not change anything`);
    }
    const origin = headers.origin;
    if (origin !== undefined && !sameOrigin(origin, headers.host)) {
      throw forbidden('PUNCTUAL_CROSS_SITE', `a request from origin ${JSON.stringify(origin)} may not change anything`);
    }
    const type = headers['content-type'];
    if (type !== undefined && !/^application\/json\s*(;|$)/i.test(type)) {
      throw new HttpError(415, 'PUNCTUAL_UNSUPPORTED_MEDIA_TYPE', `a request body must be application/json, got ${JSON.stringify(type)}`);
    }
  });
}

function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return new URL(origin).host === new URL(`http://${host}`).host;
  } catch {
    return false; // "null" (a sandboxed frame, a file) or garbage
  }
}

/** Security headers on every answer; the CSP allows the dashboard's own files and nothing else. */
export function installHeaders(app: FastifyInstance): void {
  void app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        scriptSrcAttr: ["'none'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        fontSrc: ["'self'"],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
    },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    // TLS, when there is any, ends at a proxy in front: HSTS is its decision.
    strictTransportSecurity: false,
  });
}
