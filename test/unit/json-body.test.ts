import fc from 'fast-check';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { installErrorHandler } from '../../src/http/errors.js';
import { installJsonBody, MAX_BODY_DEPTH, nestsDeeperThan } from '../../src/http/json-body.js';

const deeper = (text: string, limit: number) => nestsDeeperThan(Buffer.from(text), limit);
const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('the depth scan', () => {
  it('counts arrays and objects inside one another, to the limit and one past it', () => {
    expect(deeper(nested(5), 5)).toBe(false);
    expect(deeper(nested(6), 5)).toBe(true);
    expect(deeper('{"a":[{"b":[1]}]}', 4)).toBe(false);
    expect(deeper('{"a":[{"b":[1]}]}', 3)).toBe(true);
    // Siblings are not depth.
    expect(deeper('[[],[],{},[[]],{"a":{}}]', 3)).toBe(false);
    expect(deeper('', 0)).toBe(false);
    expect(deeper('123', 0)).toBe(false);
  });

  it('does not count brackets inside strings, with escaped quotes and backslashes', () => {
    expect(deeper('["[[[[{{{{"]', 1)).toBe(false);
    expect(deeper('{"[[[[":"{{{{"}', 1)).toBe(false);
    // \" does not end the string, so the brackets after it are still inside it.
    expect(deeper(String.raw`["a\"[[[[", "b"]`, 1)).toBe(false);
    // \\ is a backslash: the quote after it does end the string, and what follows counts.
    expect(deeper(String.raw`["a\\", [[]]]`, 2)).toBe(true);
    expect(deeper(String.raw`["a\\", [[]]]`, 3)).toBe(false);
    expect(deeper(String.raw`["\\\"[[[", [[]]]`, 2)).toBe(true);
    expect(deeper(String.raw`["\\\"[[[", [[]]]`, 3)).toBe(false);
    expect(deeper(String.raw`["\u005b\u007b"]`, 1)).toBe(false);
  });

  it('answers what the parsed value says, for any JSON text', () => {
    /** Levels of arrays and objects inside one another in a parsed value. */
    const depthOf = (value: unknown): number =>
      value !== null && typeof value === 'object' ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0;
    // Strings full of the bytes the scan looks at: quotes, backslashes, brackets.
    const tricky = fc.string({ unit: fc.constantFrom('"', '\\', '[', ']', '{', '}', 'a', 'é', '🎉') });
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        tricky,
        fc.integer(),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(tricky, tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), fc.boolean(), (parsed, limit, indent) => {
        const text = JSON.stringify(parsed, null, indent ? 2 : undefined);
        expect(deeper(text, limit)).toBe(depthOf(parsed) > limit);
      }),
      { numRuns: 3000 },
    );
  });

  it('reads UTF-8 bytes: a multi-byte character never looks like a bracket or a quote', () => {
    expect(deeper('["€[{ 日本 🎉", ["ü"]]', 2)).toBe(false);
    expect(deeper('["€", [["ü"]]]', 2)).toBe(true);
  });
});

function app() {
  const fastify = Fastify();
  installErrorHandler(fastify);
  installJsonBody(fastify);
  fastify.post('/echo', async (request) => ({ body: request.body }));
  return fastify;
}

describe('the JSON body parser', () => {
  it('refuses a body nested past MAX_BODY_DEPTH with a 400 in Fastify’s shape, and parses one at it', async () => {
    const server = app();
    const refused = await server.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/json' },
      payload: nested(MAX_BODY_DEPTH + 1),
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toEqual({
      statusCode: 400,
      code: 'PUNCTUAL_BAD_REQUEST',
      error: 'Bad Request',
      message: `body must not nest more than ${MAX_BODY_DEPTH} levels of arrays and objects`,
    });
    const parsed = await server.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/json' },
      payload: nested(MAX_BODY_DEPTH),
    });
    expect(parsed.statusCode).toBe(200);
    expect(JSON.stringify(parsed.json().body)).toBe(nested(MAX_BODY_DEPTH));
    await server.close();
  });

  it('keeps what Fastify’s own parser does: poisoning refused, an empty body refused, any charset, a BOM', async () => {
    const server = app();
    const send = (payload: string, type = 'application/json') =>
      server.inject({ method: 'POST', url: '/echo', headers: { 'content-type': type }, payload });
    for (const poisoned of ['{"__proto__":{"admin":true}}', '{"a":{"constructor":{"prototype":{"admin":true}}}}']) {
      const answer = await send(poisoned);
      expect(answer.statusCode, poisoned).toBe(400);
      expect(answer.json().code).toBe('PUNCTUAL_BAD_REQUEST');
    }
    const empty = await send('');
    expect(empty.statusCode).toBe(400);
    expect(empty.json().code).toBe('PUNCTUAL_BAD_REQUEST');
    expect((await send('{"a":')).json().code).toBe('PUNCTUAL_BAD_REQUEST');
    expect((await send('{"note":"日本"}', 'application/json; charset=utf-8')).json()).toEqual({ body: { note: '日本' } });
    expect((await send('{"a":1}', 'Application/JSON; charset=latin1')).json()).toEqual({ body: { a: 1 } });
    expect((await send('\uFEFF{"a":2}')).json()).toEqual({ body: { a: 2 } });
    await server.close();
  });
});
