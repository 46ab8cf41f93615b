/**
 * webhook: calls a URL when the task is due. Invariant 4: an outside effect is at-least-once, so
 * every call carries the same `Idempotency-Key` for a task across all its attempts. Every call is
 * signed (`X-Punctual-Signature` over `canonicalString`), goes only where egress.ts allows, follows
 * no redirect, reads a bounded answer, and carries only punctual's headers and the payload's own
 * (undici's `request`, not `fetch`; spoofing headers refused by outgoing-headers.ts).
 * See docs/architecture.md#webhook-calls.
 */
import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { Type } from 'typebox';
import { Egress, listed, portOf } from './egress.js';
import { type OutsideHandler, PermanentError } from './handler.js';
import { firstReserved } from './outgoing-headers.js';
import { RetryLater, retryAfterMs } from './retry-after.js';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
const USER_AGENT = `punctual/${version}`;

const MAX_RESPONSE_BYTES = 64 * 1024;
/** Excerpt of a trusted host's error answer kept in lastError. */
const EXCERPT_CHARS = 200;
const payload = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) URL on a host listed in WEBHOOK_ALLOWED_HOSTS' }),
    method: Type.Optional(
      Type.Union([Type.Literal('POST'), Type.Literal('PUT'), Type.Literal('PATCH'), Type.Literal('DELETE'), Type.Literal('GET')]),
    ),
    headers: Type.Optional(
      Type.Record(
        Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$" }),
        Type.String({ maxLength: 1024, pattern: '^[\\x20-\\x7e]*$' }),
        // Without it, a name the pattern refuses is simply not checked (patternProperties).
        { maxProperties: 32, additionalProperties: false },
      ),
    ),
    body: Type.Optional(Type.Unknown({ description: 'sent as JSON' })),
  },
  { additionalProperties: false },
);

export interface WebhookOptions {
  secret: string | undefined;
  /** The key that will replace `secret`: calls carry a signature with each while both are set. */
  nextSecret?: string | undefined;
  /** A host's own key (`host` or `host:port`, lower case): used for it instead of `secret`. */
  hostSecrets?: Map<string, string>;
  hostSecretsNext?: Map<string, string>;
  /** `host` (any port) or `host:port`, lower case. */
  allowedHosts: string[];
  /** Hosts whose error answers may be quoted in lastError. */
  trustedHosts?: string[];
  timeoutMs: number;
}

/** What a signature covers. */
export interface SignedCall {
  timestamp: number;
  method: string;
  /** The URL called, as the WHATWG URL parser writes it (`new URL(url).href`), without a fragment. */
  url: string;
  idempotencyKey: string;
  body: string;
}

/**
 * The URL as it is sent and as it goes into the canonical string: WHATWG-serialized, the
 * fragment dropped (it is never sent), and an empty query dropped (`/x?` goes out as `/x`).
 */
export function canonicalUrl(url: string): string {
  const parsed = new URL(url);
  parsed.hash = '';
  if (parsed.search === '') parsed.search = '';
  return parsed.href;
}

/**
 * The text that is signed, one field per line:
 * `<t>\n<METHOD>\n<url>\n<Idempotency-Key>\n<hex SHA-256 of the raw body>` (the empty body's
 * hash for a call without one).
 */
export function canonicalString(call: SignedCall): string {
  const bodyHash = createHash('sha256').update(call.body).digest('hex');
  return `${call.timestamp}\n${call.method.toUpperCase()}\n${call.url}\n${call.idempotencyKey}\n${bodyHash}`;
}

/**
 * The signature header value for a call, one `v2=` per secret. Receivers recompute it with the
 * secret they know and accept the call if any `v2=` matches and `t` is recent.
 */
export function sign(secrets: string[], call: SignedCall): string {
  const text = canonicalString(call);
  const digests = secrets.map((secret) => `v2=${createHmac('sha256', secret).update(text).digest('hex')}`);
  return `t=${call.timestamp},${digests.join(',')}`;
}

/** The key a receiver uses to drop repeats: the same for every attempt of a task. */
export function idempotencyKey(task: { id: number; createdAt: number }): string {
  return `punctual-${task.id}-${task.createdAt}`;
}

/** At most MAX_RESPONSE_BYTES of a body; the rest is never read (the connection is dropped). */
async function readBounded(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size >= MAX_RESPONSE_BYTES) break;
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES);
}

/** A short, printable excerpt of an answer. */
function excerpt(answer: Buffer): string {
  return (
    answer
      .toString('utf8')
      .slice(0, EXCERPT_CHARS)
      // Control characters would break a log line or the dashboard's table; so would C1 (NEL), the
      // line and paragraph separators, and bidi overrides that show the text in another order.
      // eslint-disable-next-line no-control-regex
      .replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+/g, ' ')
  );
}

/** A call's network error as the task's lastError: its code and message, a refusal by egress as permanent. */
function callError(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const { code } = error as { code?: unknown };
  if (code === 'EPUNCTUALREFUSED') return new PermanentError(`refused: ${error.message}`);
  // A DOMException's code is a number (an abort, a timeout): its message says it all.
  return typeof code === 'string' ? new Error(`${code}: ${error.message}`) : error;
}

export function webhook(options: WebhookOptions): OutsideHandler<typeof payload> {
  const egress = new Egress(options.allowedHosts);
  const hostSecrets = options.hostSecrets ?? new Map<string, string>();
  const hostSecretsNext = options.hostSecretsNext ?? new Map<string, string>();
  const trusted = options.trustedHosts ?? [];

  /** The keys a call to `url` is signed with: the host's own, else the global ones. Empty: none. */
  function secretsFor(url: string): string[] {
    const parsed = new URL(url);
    const host = parsed.hostname.toLowerCase();
    const entry = [`${host}:${portOf(parsed)}`, host].find((name) => hostSecrets.has(name));
    const keys = entry === undefined ? [options.secret, options.nextSecret] : [hostSecrets.get(entry), hostSecretsNext.get(entry)];
    return keys.filter((secret): secret is string => secret !== undefined);
  }

  /** lastError for a non-2xx answer: an excerpt for a trusted host, the status and size for anyone else. */
  function answerError(url: string, status: number, answer: Buffer): string {
    const parsed = new URL(url);
    if (listed(trusted, parsed.hostname, portOf(parsed))) return `answered ${status}: ${excerpt(answer)}`;
    const size = answer.length >= MAX_RESPONSE_BYTES ? `at least ${MAX_RESPONSE_BYTES}` : String(answer.length);
    return `answered ${status} with ${size} bytes (the body is quoted only for WEBHOOK_TRUSTED_HOSTS)`;
  }

  return {
    type: 'webhook',
    effect: 'outside',
    payload,
    timeoutMs: options.timeoutMs,

    check({ url, headers }) {
      const refused = egress.refusal(url);
      if (refused !== undefined) {
        return options.secret === undefined && hostSecrets.size === 0
          ? 'cannot be sent: webhooks are off until WEBHOOK_SECRET is set'
          : `/url ${refused}`;
      }
      if (secretsFor(url).length === 0) return 'cannot be sent: webhooks are off until WEBHOOK_SECRET is set';
      const reserved = firstReserved(headers);
      return reserved === undefined ? undefined : `/headers may not set ${reserved}`;
    },

    async run({ task, payload: { url, method = 'POST', headers = {}, body }, signal, attempt, now, answered, trace }) {
      const refused = egress.refusal(url);
      if (refused !== undefined) throw new PermanentError(`url ${refused}`);
      const secrets = secretsFor(url);
      if (secrets.length === 0) throw new PermanentError('webhooks are off until WEBHOOK_SECRET is set');

      const text = body === undefined || method === 'GET' ? '' : JSON.stringify(body);
      const key = idempotencyKey(task);
      const sent = canonicalUrl(url);
      const signature = sign(secrets, { timestamp: now, method, url: sent, idempotencyKey: key, body: text });
      // No answer until one comes: a call that fails or runs out of time is kept as status 0.
      answered({ httpStatus: 0, responseBytes: null });
      const { agent, request } = await egress.client();
      // The call's own span (a client span of the run's) when spans are recorded: its context goes in the headers.
      const call = trace?.outgoing(method, 'client', { 'http.request.method': method, 'url.full': sent });
      const response = await request(sent, {
        method,
        maxRedirections: 0,
        signal,
        dispatcher: agent,
        headers: {
          ...headers,
          ...call?.headers,
          'user-agent': USER_AGENT,
          ...(text === '' ? {} : { 'content-type': 'application/json' }),
          'idempotency-key': key,
          'x-punctual-task-id': String(task.id),
          'x-punctual-attempt': String(attempt),
          'x-punctual-signature': signature,
        },
        body: text === '' ? undefined : text,
      }).catch((error: unknown) => {
        const failed = callError(error);
        call?.end({ error: failed.message });
        throw failed;
      });
      const status = response.statusCode;
      call?.end({ httpStatus: status });
      // The status is known now, even if reading the body fails.
      answered({ httpStatus: status, responseBytes: null });
      const answer = await readBounded(response.body);
      answered({ httpStatus: status, responseBytes: answer.length });
      if (status >= 300 && status < 400) {
        throw new PermanentError(`answered ${status}: redirects are not followed`);
      }
      if (status >= 200 && status < 300) return `answered ${status}`;
      const message = answerError(url, status, answer);
      // A 4xx says the request itself is wrong; sending it again will not help (but 408/425/429 say "later").
      const later = status >= 500 || [408, 425, 429].includes(status);
      // 429 and 503 may say when to come back: the next attempt waits at least that long.
      const asked = status === 429 || status === 503 ? retryAfterMs(response.headers['retry-after'], now) : undefined;
      if (asked !== undefined) throw new RetryLater(`${message}; Retry-After ${Math.ceil(asked / 1000)} s`, asked);
      throw later ? new Error(message) : new PermanentError(message);
    },
  };
}
