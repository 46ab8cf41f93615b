/**
 * HANDLERS and PROCEDURES as the configuration reads them, and the payload schema a procedure's
 * parameter becomes: one clear line for a bad value, the types and bounds information_schema says.
 */
import { Value } from 'typebox/value';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { parameterSchema } from '../../src/handlers/procedure.js';
import { DEFAULT_CLOSE_ORDER } from '../../src/handlers/close-order.js';

const config = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'mysql://root@127.0.0.1:3306/punctual', ...env });

describe('PROCEDURES and HANDLERS', () => {
  it('reads type=procedure pairs, qualified or not', () => {
    expect(config({ PROCEDURES: 'close_unpaid=shop.close_unpaid_order, start_sale=start_flash_sale' }).handlers.procedures).toEqual([
      { type: 'close_unpaid', schema: 'shop', name: 'close_unpaid_order' },
      { type: 'start_sale', schema: undefined, name: 'start_flash_sale' },
    ]);
    expect(config({ HANDLERS: '/srv/a.mjs, ./b.mjs' }).handlers.modules).toEqual(['/srv/a.mjs', './b.mjs']);
    expect(config({}).handlers).toEqual({ modules: [], procedures: [], closeOrder: DEFAULT_CLOSE_ORDER });
  });

  it.each([
    ['close_unpaid', 'PROCEDURES entries are type=procedure or type=schema.procedure, got "close_unpaid"'],
    ['a=b=c', 'PROCEDURES entries are type=procedure or type=schema.procedure, got "a=b=c"'],
    ['x=shop.close`; DROP', 'PROCEDURES entries are type=procedure or type=schema.procedure, got "x=shop.close`; DROP"'],
    ['Close=shop.p', 'PROCEDURES: "Close" is not a task type name (a lower-case letter, then a-z 0-9 _ . -, 64 at most)'],
    ['a=shop.p,a=shop.q', 'PROCEDURES declares the type a twice'],
  ])('refuses PROCEDURES=%s with one line', (value, message) => {
    expect(() => config({ PROCEDURES: value })).toThrow(message);
  });

  it('refuses a module named twice', () => {
    expect(() => config({ HANDLERS: '/srv/a.mjs,/srv/a.mjs' })).toThrow('HANDLERS names "/srv/a.mjs" twice');
  });
});

describe('a procedure parameter as a payload schema', () => {
  const of = (
    dataType: string,
    declared: string,
    extra: Partial<{ maxLength: number; numericPrecision: number; numericScale: number }> = {},
  ) => {
    const schema = parameterSchema({ dataType, declared, maxLength: null, numericPrecision: null, numericScale: null, ...extra });
    if (typeof schema === 'string') throw new Error(schema);
    return (value: unknown) => Value.Check(schema, value);
  };

  it('bounds integers by their type and sign', () => {
    const tiny = of('tinyint', 'tinyint(4)');
    expect([tiny(-128), tiny(127), tiny(128), tiny(1.5), tiny('1')]).toEqual([true, true, false, false, false]);
    const unsigned = of('int', 'int(10) unsigned');
    expect([unsigned(0), unsigned(4294967295), unsigned(-1), unsigned(4294967296)]).toEqual([true, true, false, false]);
    const big = of('bigint', 'bigint(20)');
    expect([big(Number.MAX_SAFE_INTEGER), big(Number.MIN_SAFE_INTEGER)]).toEqual([true, true]);
  });

  it('bounds strings by their length, decimals by their digits, enums by their values, dates by their form', () => {
    const name = of('varchar', 'varchar(8)', { maxLength: 8 });
    expect([name('12345678'), name('123456789'), name(7)]).toEqual([true, false, false]);
    const money = of('decimal', 'decimal(5,2)', { numericPrecision: 5, numericScale: 2 });
    expect([money(999.99), money(-999.99), money(1000), money('1')]).toEqual([true, true, false, false]);
    const state = of('enum', "enum('open','it''s shut')");
    expect([state('open'), state("it's shut"), state('closed')]).toEqual([true, true, false]);
    const day = of('date', 'date');
    expect([day('2026-12-01'), day('2026-12-01 10:00:00'), day('tomorrow')]).toEqual([true, false, false]);
    const at = of('datetime', 'datetime(3)');
    expect([at('2026-12-01 10:00:00'), at('2026-12-01T10:00:00.250'), at('2026-12-01')]).toEqual([true, true, false]);
  });

  it('names a type a JSON payload cannot carry', () => {
    expect(
      parameterSchema({ dataType: 'geometry', declared: 'geometry', maxLength: null, numericPrecision: null, numericScale: null }),
    ).toBe('parameter type geometry cannot be passed from a JSON payload');
  });
});
