/** The runs the type limits admitted and that did not finish, per group key and per type. */
import { describe, expect, it } from 'vitest';
import { RunCounts } from '../../src/dispatch/run-counts.js';

describe('run counts', () => {
  it('count per group key and per type, and drop what reaches zero', () => {
    const counts = new RunCounts();
    counts.start('mail', 'mail\u0000A');
    counts.start('mail', 'mail\u0000A');
    counts.start('mail', 'mail\u0000B');
    counts.start('sms', 'sms');
    expect([counts.ofKey('mail\u0000A'), counts.ofKey('mail\u0000B'), counts.ofType('mail'), counts.ofType('sms')]).toEqual([2, 1, 3, 1]);
    counts.finish('mail', 'mail\u0000A');
    counts.finish('sms', 'sms');
    expect([counts.ofKey('mail\u0000A'), counts.ofType('mail'), counts.ofType('sms')]).toEqual([1, 2, 0]);
    expect([...counts.types()]).toEqual(['mail']);
  });

  it('never go below zero: a finish too many leaves nothing behind', () => {
    const counts = new RunCounts();
    counts.finish('mail', 'mail');
    expect(counts.ofKey('mail')).toBe(0);
    counts.start('mail', 'mail');
    expect(counts.ofKey('mail')).toBe(1);
  });
});
