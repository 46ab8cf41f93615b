import { describe, expect, it } from 'vitest';
import { retryAt } from '../../src/lifecycle/backoff.js';
import { retryAfterMs } from '../../src/handlers/retry-after.js';

const NOW = Date.parse('2026-12-01T00:00:00.000Z');

describe('Retry-After', () => {
  it('reads seconds and HTTP dates, and nothing else', () => {
    expect(retryAfterMs('60', NOW)).toBe(60_000);
    expect(retryAfterMs(' 0 ', NOW)).toBe(0);
    expect(retryAfterMs('Tue, 01 Dec 2026 00:00:30 GMT', NOW)).toBe(30_000);
    expect(retryAfterMs('Tuesday, 01-Dec-26 00:01:00 GMT', NOW)).toBe(60_000);
    expect(retryAfterMs('Mon, 30 Nov 2026 23:00:00 GMT', NOW)).toBe(0); // in the past: no wait
    expect(retryAfterMs(['5', '9'], NOW)).toBe(5_000);
    for (const bad of [undefined, '', '-5', '1.5', 'soon', '60s', '99999999999', 'Tue, 99 Foo 2026 GMT']) {
      expect(retryAfterMs(bad, NOW), String(bad)).toBeUndefined();
    }
  });

  it('the retry comes no sooner than asked, capped by the maximum, and never sooner than the backoff', () => {
    const policy = { baseMs: 100, maxMs: 10_000, random: () => 0 };
    expect(retryAt(policy, 1, 4, NOW)).toBe(NOW + 100);
    expect(retryAt(policy, 1, 4, NOW, 3_000)).toBe(NOW + 3_000);
    expect(retryAt(policy, 1, 4, NOW, 3_600_000)).toBe(NOW + 10_000);
    expect(retryAt(policy, 1, 4, NOW, 10)).toBe(NOW + 100);
    expect(retryAt(policy, 4, 4, NOW, 3_000)).toBeNull();
  });
});
