import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stockReturns } from '../../src/handlers/close-order.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { canonicalString, canonicalUrl, idempotencyKey, sign } from '../../src/handlers/webhook.js';

describe('close_order: stock to put back', () => {
  it('sums each goods id once and lists them in id order (the order rows are locked in)', () => {
    expect(
      stockReturns([
        { goods_id: 7, num: 2 },
        { goods_id: 3, num: 1 },
        { goods_id: 7, num: 1 },
        { goods_id: 5, num: 0 },
      ]),
    ).toEqual([
      [3, 1],
      [7, 3],
    ]);
    expect(stockReturns([])).toEqual([]);
  });

  it.each([
    ['not an array'],
    [{ goods_id: 1, num: 1 }],
    [[{ goods_id: 'x', num: 1 }]],
    [[{ goods_id: 1, num: -1 }]],
    [[{ goods_id: 1 }]],
    [[null]],
  ])('refuses malformed items for good: %j', (items) => {
    expect(() => stockReturns(items)).toThrow(PermanentError);
  });
});

describe('webhook signatures', () => {
  it('sign the canonical string once per key, and keep one idempotency key per task', () => {
    const call = {
      timestamp: 1_796_090_400_000,
      method: 'POST',
      url: 'https://shop.example/hooks/expired?x=1',
      idempotencyKey: 'punctual-42-1796000000000',
      body: '{"a":1}',
    };
    const bodyHash = createHash('sha256').update('{"a":1}').digest('hex');
    expect(canonicalString(call)).toBe(
      `1796090400000\nPOST\nhttps://shop.example/hooks/expired?x=1\npunctual-42-1796000000000\n${bodyHash}`,
    );
    const digest = (secret: string) => createHmac('sha256', secret).update(canonicalString(call)).digest('hex');
    expect(sign(['current', 'next'], call)).toBe(`t=1796090400000,v2=${digest('current')},v2=${digest('next')}`);
    // Anything else signed differently: another method, URL, key or body.
    for (const other of [
      { method: 'DELETE' },
      { url: 'https://shop.example/hooks/other' },
      { idempotencyKey: 'punctual-43-1' },
      { body: '' },
    ]) {
      expect(sign(['current'], { ...call, ...other })).not.toBe(sign(['current'], call));
    }
    expect(canonicalUrl('HTTPS://Shop.Example:443/a b?q=1#frag')).toBe('https://shop.example/a%20b?q=1');
    expect(canonicalUrl('https://shop.example/x?#frag')).toBe('https://shop.example/x');
    expect(idempotencyKey({ id: 42, createdAt: 1_796_000_000_000 })).toBe('punctual-42-1796000000000');
  });
});
