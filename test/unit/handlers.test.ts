import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stockReturns } from '../../src/handlers/close-order.js';
import { PermanentError } from '../../src/handlers/handler.js';
import { idempotencyKey, sign } from '../../src/handlers/webhook.js';

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
  it('sign "<t>.<body>" once per key, and keep one idempotency key per task', () => {
    const header = sign(['current', 'next'], 1_796_090_400_000, '{"a":1}');
    const digest = (secret: string) => createHmac('sha256', secret).update('1796090400000.{"a":1}').digest('hex');
    expect(header).toBe(`t=1796090400000,v1=${digest('current')},v1=${digest('next')}`);
    expect(idempotencyKey({ id: 42, createdAt: 1_796_000_000_000 })).toBe('punctual-42-1796000000000');
  });
});
