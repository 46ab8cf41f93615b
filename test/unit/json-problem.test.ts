/**
 * jsonProblem: what a payload must not have before anything walks or stores it (too deep, a lone
 * surrogate in a string or a name). It runs for every item of a batch, so it is written without
 * an entry or a pair a value; these cases pin what it finds, wherever in the value it is.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonProblem } from '../../src/util/schema-errors.js';

const DEEP = 'must not nest more than 3 levels deep';
const STRING = 'must not contain a string that is not valid Unicode (a lone surrogate)';
const NAME = 'must not contain a name that is not valid Unicode (a lone surrogate)';

/** `inner` wrapped in `levels` arrays or objects, alternating. */
function wrapped(inner: unknown, levels: number): unknown {
  let value = inner;
  for (let i = 0; i < levels; i++) value = i % 2 === 0 ? [1, value] : { a: 'x', b: value };
  return value;
}

describe('jsonProblem', () => {
  it('takes values up to the depth and refuses one level more, in arrays and objects alike', () => {
    for (const inner of [1, 'x', null, true]) {
      expect(jsonProblem(wrapped(inner, 3), 3)).toBeUndefined();
      expect(jsonProblem(wrapped([inner], 3), 3)).toBe(DEEP);
      expect(jsonProblem(wrapped({ inner }, 3), 3)).toBe(DEEP);
    }
    expect(jsonProblem(wrapped({}, 3), 3)).toBe(DEEP);
    expect(jsonProblem([[], {}, [[]]], 3)).toBeUndefined();
  });

  it('finds a lone surrogate in a string or a name, however deep and wherever it stands', () => {
    expect(jsonProblem('a\ud800', 3)).toBe(STRING);
    expect(jsonProblem({ a: ['x', { b: 'y\udc00' }] }, 3)).toBe(STRING);
    expect(jsonProblem([{}, { ['k\ud800']: 1 }], 3)).toBe(NAME);
    expect(jsonProblem({ ok: '😀', ['😀']: ['é'] }, 3)).toBeUndefined();
  });

  it('answers for any JSON value what a walk over its entries answers', () => {
    /** The reference: every value and name, by recursion over Object.entries. */
    const reference = (value: unknown, depth: number, max: number): string[] => {
      if (typeof value === 'string') return value.isWellFormed() ? [] : [STRING];
      if (value === null || typeof value !== 'object') return [];
      if (depth >= max) return [`must not nest more than ${max} levels deep`];
      return Object.entries(value).flatMap(([name, child]) => [
        ...(name.isWellFormed() ? [] : [NAME]),
        ...reference(child, depth + 1, max),
      ]);
    };
    const text = fc.string({ unit: fc.constantFrom('a', '\ud800', '\udc00', '😀') });
    const json = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.integer(),
        fc.constant(null),
        fc.array(tie('value')),
        fc.dictionary(text, tie('value')),
      ),
    })).value;
    fc.assert(
      fc.property(json, fc.integer({ min: 1, max: 4 }), (value, max) => {
        const found = reference(value, 0, max);
        const problem = jsonProblem(value, max);
        if (found.length === 0) expect(problem).toBeUndefined();
        else expect(found).toContain(problem);
      }),
      { numRuns: 2000 },
    );
  });
});
