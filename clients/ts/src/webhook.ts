/**
 * The shop's side of punctual's webhook, for a receiver in TypeScript: is this call from punctual,
 * for this request, and fresh? `X-Punctual-Signature: t=<epoch ms>,v2=<hex>[,v2=<hex>]`, one `v2`
 * per key punctual holds for the receiving host (two while a key rotation is under way), each the
 * HMAC-SHA256 of five lines joined by "\n": `t`, the method, the URL punctual called (as the WHATWG
 * URL parser writes it, without #fragment or an empty `?`), the Idempotency-Key, and the hex
 * SHA-256 of the raw body (docs/handlers.md#signatures-and-the-canonical-string).
 *
 * What it decides: Web Crypto (`crypto.subtle`), so it runs in Node 20 and in any modern runtime
 * without a dependency, and is therefore async; the digests are compared in constant time; a `t`
 * further than `toleranceMs` from now either way is refused (clocks differ). Replays within the
 * window are the receiver's to drop, by the Idempotency-Key it has handled.
 */

export interface WebhookCall {
  /** The request's method: POST, PUT, PATCH, DELETE or GET. */
  method: string;
  /** The full URL punctual called (the task payload's `url`), e.g. `https://shop.example/hooks/close?x=1`. */
  url: string;
  /** The raw body, exactly as it arrived (before any JSON parsing). */
  body: string | Uint8Array;
  /** The X-Punctual-Signature header. */
  signature: string | null | undefined;
  /** The Idempotency-Key header. */
  idempotencyKey: string | null | undefined;
}

export interface WebhookKeys {
  /** WEBHOOK_SECRET (or the host's key), and the next one during a rotation. */
  secrets: readonly string[];
  /** How far `t` may be from now (default 5 minutes). */
  toleranceMs?: number;
  /** Now, in epoch ms (tests); default Date.now(). */
  now?: number;
}

const encoder = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** Equal strings of hex digits, compared in time that does not depend on where they differ. */
function sameDigest(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

/** The URL as punctual signs it: the WHATWG parser's form, without a fragment or an empty query. */
export function canonicalWebhookUrl(url: string): string {
  const parsed = new URL(url);
  parsed.hash = '';
  if (parsed.search === '') parsed.search = '';
  return parsed.href;
}

/** True when the call is punctual's, for this method, URL, key and body, and recent. */
export async function verifyWebhook(call: WebhookCall, keys: WebhookKeys): Promise<boolean> {
  const [stamp = '', ...parts] = String(call.signature ?? '').split(',');
  const t = /^t=(\d{1,16})$/.exec(stamp.trim())?.[1];
  const given = parts.map((part) => /^v2=([0-9a-f]{64})$/.exec(part.trim())?.[1]).filter((digest) => digest !== undefined);
  if (t === undefined || given.length === 0) return false;
  if (Math.abs((keys.now ?? Date.now()) - Number(t)) > (keys.toleranceMs ?? 300_000)) return false;
  let url: string;
  try {
    url = canonicalWebhookUrl(call.url);
  } catch {
    return false;
  }
  // A copy: Web Crypto takes no view of a SharedArrayBuffer (a Node Buffer may be one).
  const body = typeof call.body === 'string' ? encoder.encode(call.body) : new Uint8Array(call.body);
  const bodyHash = hex(await crypto.subtle.digest('SHA-256', body));
  const signed = encoder.encode([t, call.method.toUpperCase(), url, call.idempotencyKey ?? '', bodyHash].join('\n'));
  for (const secret of keys.secrets) {
    if (secret === '') continue;
    const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    const expected = hex(await crypto.subtle.sign('HMAC', key, signed));
    if (given.some((digest) => sameDigest(digest, expected))) return true;
  }
  return false;
}
