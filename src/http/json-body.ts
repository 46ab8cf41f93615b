/**
 * The JSON body parser of every route: Fastify's own (secure-json-parse, so `__proto__` and
 * `constructor.prototype` are refused; an empty body is a 400; the bytes are read as UTF-8
 * whatever the charset says), after one linear scan of the bytes that refuses a body nested
 * deeper than any route can take. JSON.parse builds every level before anything can look at
 * the value: 16 MiB of `[` is eight million arrays, seconds of a blocked event loop and most of
 * a gigabyte. The scan looks at each byte once and stops at the first level too many.
 */
import type { FastifyInstance } from 'fastify';
import { MAX_PAYLOAD_DEPTH } from './create-input.js';
import { HttpError } from './errors.js';

/** `{"tasks":[{…}]}`: the levels a batch item's payload sits under. */
const BATCH_ENVELOPE_DEPTH = 3;
/**
 * The deepest valid body is a batch whose item's payload nests MAX_PAYLOAD_DEPTH levels: 34 in
 * all. More than twice that is refused here. Up to it, a payload a few levels too deep is still
 * answered by its own field's check (per item in a batch, as alone), and that little depth costs
 * nothing to parse.
 */
export const MAX_BODY_DEPTH = 2 * (BATCH_ENVELOPE_DEPTH + MAX_PAYLOAD_DEPTH);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether the JSON text in `bytes` opens more than `limit` arrays and objects inside one another.
 * Brackets inside strings do not count (a backslash escapes the byte after it). UTF-8 never uses
 * these bytes inside a multi-byte character. Malformed text is left to the parser to refuse.
 * A string is skipped with indexOf (native) to its closing quote: most of a body is strings.
 */
export function nestsDeeperThan(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (byte === QUOTE) {
      i = closingQuote(bytes, i);
      if (i < 0) return false;
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

/** The index of the quote that closes the string opened at `open` (one after no odd run of backslashes), or -1. */
function closingQuote(bytes: Uint8Array, open: number): number {
  let quote = open;
  for (;;) {
    quote = bytes.indexOf(QUOTE, quote + 1);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (bytes[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
  }
}

/** Replaces Fastify's application/json parser, for every route registered after it. */
export function installJsonBody(app: FastifyInstance): void {
  // The options Fastify's own parser gets by default; buildApp sets no others.
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (nestsDeeperThan(body, MAX_BODY_DEPTH)) {
      done(
        new HttpError(400, 'PUNCTUAL_BAD_REQUEST', `body must not nest more than ${MAX_BODY_DEPTH} levels of arrays and objects`),
        undefined,
      );
      return;
    }
    // Decoded as Fastify decodes any text body: UTF-8, whatever the charset parameter says.
    void parse(request, body.toString('utf8'), done);
  });
}
