/**
 * webhook: calls a URL when the task is due. At-least-once: a process that dies mid-call leaves
 * the task to run again when its lease runs out, so every call carries the same
 * `Idempotency-Key` for a task across all its attempts, and receivers drop repeats.
 *
 * Every request is signed: `X-Punctual-Signature: t=<epoch ms>,v1=<hex HMAC-SHA256 of
 * "<t>.<body>" with WEBHOOK_SECRET>`, plus a second `v1=` with WEBHOOK_SECRET_NEXT while a key
 * rotation is under way. Only hosts listed in WEBHOOK_ALLOWED_HOSTS are called (see egress.ts),
 * redirects are not followed, and the response body read is bounded.
 */
import { createHmac } from 'node:crypto';
import { Type } from 'typebox';
import { fetch } from 'undici';
import { Egress } from './egress.js';
import { type OutsideHandler, PermanentError } from './handler.js';

const MAX_RESPONSE_BYTES = 64 * 1024;
const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'idempotency-key']);

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
        {
          maxProperties: 32,
        },
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
  /** `host` (any port) or `host:port`, lower case. */
  allowedHosts: string[];
  timeoutMs: number;
}

/**
 * The signature header value for `body` sent at `timestamp`, one `v1=` per secret. Receivers
 * recompute it with the secret they know and accept the call if any `v1=` matches.
 */
export function sign(secrets: string[], timestamp: number, body: string): string {
  const digests = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`);
  return `t=${timestamp},${digests.join(',')}`;
}

/** The key a receiver uses to drop repeats: the same for every attempt of a task. */
export function idempotencyKey(task: { id: number; createdAt: number }): string {
  return `punctual-${task.id}-${task.createdAt}`;
}

async function readBounded(response: Awaited<ReturnType<typeof fetch>>): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < MAX_RESPONSE_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8');
}

/** The network error under fetch's "fetch failed", as the task's lastError. */
function callError(error: unknown): Error {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  if (cause?.code === 'EPUNCTUALREFUSED') return new PermanentError(`refused: ${cause.message}`);
  if (cause?.message !== undefined && error instanceof Error && error.message === 'fetch failed') {
    return new Error(`${cause.code ?? 'network error'}: ${cause.message}`);
  }
  return error instanceof Error ? error : new Error(String(error));
}

export function webhook(options: WebhookOptions): OutsideHandler<typeof payload> {
  const egress = new Egress(options.allowedHosts);
  const secrets = [options.secret, options.nextSecret].filter((secret): secret is string => secret !== undefined);
  return {
    type: 'webhook',
    effect: 'outside',
    payload,
    timeoutMs: options.timeoutMs,

    check({ url, headers }) {
      if (options.secret === undefined) return 'cannot be sent: webhooks are off until WEBHOOK_SECRET is set';
      const refused = egress.refusal(url);
      if (refused !== undefined) return `/url ${refused}`;
      const reserved = Object.keys(headers ?? {}).find(
        (name) => RESERVED_HEADERS.has(name.toLowerCase()) || name.toLowerCase().startsWith('x-punctual-'),
      );
      return reserved === undefined ? undefined : `/headers may not set ${reserved}`;
    },

    async run({ task, payload: { url, method = 'POST', headers = {}, body }, signal, attempt, now }) {
      if (secrets.length === 0) throw new PermanentError('webhooks are off until WEBHOOK_SECRET is set');
      const refused = egress.refusal(url);
      if (refused !== undefined) throw new PermanentError(`url ${refused}`);

      const text = body === undefined || method === 'GET' ? '' : JSON.stringify(body);
      const response = await fetch(url, {
        method,
        redirect: 'manual',
        signal,
        dispatcher: egress.dispatcher,
        headers: {
          ...headers,
          ...(text === '' ? {} : { 'content-type': 'application/json' }),
          'idempotency-key': idempotencyKey(task),
          'x-punctual-task-id': String(task.id),
          'x-punctual-attempt': String(attempt),
          'x-punctual-signature': sign(secrets, now, text),
        },
        body: text === '' ? undefined : text,
      }).catch((error: unknown) => {
        throw callError(error);
      });
      const answer = await readBounded(response);
      if (response.status >= 300 && response.status < 400) {
        throw new PermanentError(`answered ${response.status}: redirects are not followed`);
      }
      if (response.status >= 200 && response.status < 300) return `answered ${response.status}`;
      const message = `answered ${response.status}: ${answer.slice(0, 500)}`;
      // A 4xx says the request itself is wrong; sending it again will not help (but 408/425/429 say "later").
      const later = response.status >= 500 || [408, 425, 429].includes(response.status);
      throw later ? new Error(message) : new PermanentError(message);
    },
  };
}
