/**
 * The intake writes its INSERT as text (TupleWriter, datetimeLiteral, sqlLiteral) instead of
 * handing mysql2 a statement of placeholders and 18 values a row. The text must be what mysql2
 * writes for the same values on punctual's connections (UTC): every instant, every string a shop
 * can send (quotes, backslashes, NUL, emoji), NULLs.
 */
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { MISFIRE_POLICIES } from '../../src/contract/limits.js';
import { datetimeLiteral } from '../../src/db/connection.js';
import { insertTuple, TupleWriter } from '../../src/store/rows.js';
import type { NewTask } from '../../src/store/task-types.js';
import { tagTuples } from '../../src/store/tags.js';
import { insertValues } from '../helpers/insert-values.js';

/** What mysql2 writes for `value` as a placeholder's on a connection with timezone 'Z'. */
const mysql2Writes = (value: Date) => mysql.format('?', [value], false, 'Z');

describe('datetimeLiteral', () => {
  it('is the text mysql2 writes for the same instant as a Date, in UTC', () => {
    const instants = [
      0,
      1,
      999,
      -1,
      Date.UTC(2030, 0, 1),
      Date.UTC(2027, 5, 1, 2, 0, 0, 123),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999) + 1,
      Date.UTC(1000, 0, 1, 0, 0, 0, 7),
      -62_167_219_200_000,
      -62_167_219_200_001,
      1_796_484_246_015,
      Number.NaN,
      8.64e15,
    ];
    for (const ms of instants) expect(datetimeLiteral(ms)).toBe(mysql2Writes(new Date(ms)));
    expect(datetimeLiteral(Date.UTC(2027, 5, 1, 2, 0, 0, 123))).toBe("'2027-06-01 02:00:00.123'");
  });

  it('agrees with mysql2 on any instant a Date can hold', () => {
    fc.assert(
      fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (ms) => {
        expect(datetimeLiteral(ms)).toBe(mysql2Writes(new Date(ms)));
      }),
      { numRuns: 2000 },
    );
  });

  it('agrees with mysql2 on runs of instants close together, which share the minute it keeps', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1e12, max: 4e12 }),
        fc.array(fc.integer({ min: -90_000, max: 90_000 }), { maxLength: 20 }),
        (start, steps) => {
          let ms = start;
          for (const step of steps) {
            ms += step;
            expect(datetimeLiteral(ms)).toBe(mysql2Writes(new Date(ms)));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

/** Strings as a shop may send them: any Unicode, with SQL's special characters likely. */
const text = fc.oneof(
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: fc.constantFrom("'", '"', '\\', '\0', '\n', '\r', '\x1a', '\b', '\t', '%', '_', 'a', '?') }),
);
const instant = fc.integer({ min: 0, max: Date.UTC(9999, 11, 31) });

const newTask: fc.Arbitrary<NewTask> = fc.record(
  {
    key: fc.option(text),
    type: text,
    payload: fc.jsonValue(),
    runAt: instant,
    timezone: text,
    maxAttempts: fc.integer({ min: 1, max: 100 }),
    misfire: fc.constantFrom(...MISFIRE_POLICIES),
    cron: fc.option(text),
    tags: fc.array(text, { maxLength: 3 }),
    priority: fc.integer({ min: -100, max: 100 }),
    latestRunAt: fc.option(instant),
    expireAfterMs: fc.option(fc.integer({ min: 1, max: 2 ** 31 })),
    group: fc.option(text),
    traceParent: fc.option(text),
    traceState: fc.option(text),
  },
  { requiredKeys: ['key', 'type', 'payload', 'runAt', 'timezone', 'maxAttempts', 'misfire', 'cron'] },
);

/** The row mysql2 writes for `task`'s values, created at `now`, from placeholders. */
function mysql2Row(task: NewTask, now: number): string {
  const values = insertValues(task, now);
  return mysql.format(`(${values.map(() => '?').join(', ')})`, values, false, 'Z');
}

/** Tasks of a batch: each column drawn from a few values, so that runs of rows share some columns and not others. */
const batchTask: fc.Arbitrary<NewTask> = fc.record(
  {
    key: fc.option(fc.constantFrom('k1', "k'2")),
    type: fc.constantFrom('close_order', 'a\\b'),
    payload: fc.constantFrom({}, { a: 1 }),
    runAt: fc.constantFrom(0, 1, Date.UTC(2030, 0, 1)),
    timezone: fc.constantFrom('UTC', 'Asia/Shanghai'),
    maxAttempts: fc.constantFrom(1, 4),
    misfire: fc.constantFrom(...MISFIRE_POLICIES),
    cron: fc.constantFrom(null, '0 * * * *'),
    tags: fc.constantFrom([], ['a'], ['a', "b'"]),
    priority: fc.constantFrom(0, 5),
    latestRunAt: fc.constantFrom(null, Date.UTC(2031, 0, 1)),
    expireAfterMs: fc.constantFrom(null, 1000),
    group: fc.constantFrom(null, 'g'),
    traceParent: fc.constantFrom(null, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
    traceState: fc.constantFrom(null, 'congo=t61rcWkgMzE'),
  },
  { requiredKeys: ['key', 'type', 'payload', 'runAt', 'timezone', 'maxAttempts', 'misfire', 'cron'] },
);

describe('insertTuple', () => {
  it("is the row mysql2 writes for the task's values, whatever they hold", () => {
    fc.assert(
      fc.property(newTask, instant, (task, now) => {
        expect(insertTuple(task, datetimeLiteral(now))).toBe(mysql2Row(task, now));
      }),
      { numRuns: 1000 },
    );
  });

  it("is each row of a batch, written one after another by one writer, as mysql2 writes the row's values", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(batchTask, fc.constantFrom(0, 1, 60_000)), { minLength: 1, maxLength: 12 }), (rows) => {
        const writer = new TupleWriter();
        for (const [task, now] of rows) expect(writer.tuple(task, datetimeLiteral(now))).toBe(mysql2Row(task, now));
      }),
      { numRuns: 2000 },
    );
  });

  it("writes the payload's JSON the create made for its size check, not a second one", () => {
    const task: NewTask = {
      key: null,
      type: 't',
      payload: { a: 1 },
      payloadJson: '{"a": 1}',
      runAt: 0,
      timezone: 'UTC',
      maxAttempts: 1,
      misfire: 'run',
      cron: null,
    };
    expect(insertTuple(task, "'x'")).toContain(`'{\\"a\\": 1}'`);
    expect(insertTuple({ ...task, payloadJson: undefined }, "'x'")).toContain(`'{\\"a\\":1}'`);
  });
});

describe('tagTuples', () => {
  it("is the rows mysql2 writes for a task's (id, tag) pairs", () => {
    fc.assert(
      fc.property(fc.nat(), fc.array(text, { maxLength: 5 }), (id, tags) => {
        const pairs = tags.flatMap((tag) => [id, tag]);
        expect(tagTuples(id, tags)).toBe(mysql.format(tags.map(() => '(?, ?)').join(', '), pairs));
      }),
    );
  });
});
