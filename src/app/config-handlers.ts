/**
 * The kinds of the variables that bring a shop's own work and schema (docs/handlers.md): HANDLERS,
 * a list of module paths, PROCEDURES, `type=procedure` pairs, and CLOSE_ORDER, the shop's tables
 * close_order works on. Read like every other kind
 * (config-kinds.ts): a bad value is one ConfigError line naming the variable and the entry.
 */
import { Type } from 'typebox';
import { HANDLER_TYPE_PATTERN } from '../contract/handler-module.js';
import type { ProcedureEntry } from '../handlers/procedure.js';
import { DEFAULT_CLOSE_ORDER, type CloseOrderMapping } from '../handlers/close-order.js';
import { ConfigError, type Kind } from './config-kinds.js';

const TYPE = new RegExp(HANDLER_TYPE_PATTERN);
/** A procedure, optionally qualified by its schema: unquoted MySQL identifiers. */
const PROCEDURE = /^(?:([A-Za-z0-9_$]{1,64})\.)?([A-Za-z0-9_$]{1,64})$/;

/** Comma-separated paths of handler modules (absolute, or relative to the working directory). */
export const modulePaths: Kind<string[]> = {
  type: 'list of module paths',
  schema: Type.Array(Type.String({ minLength: 1 })),
  read(text, name) {
    const paths = text
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    const twice = paths.find((path, i) => paths.indexOf(path) !== i);
    if (twice !== undefined) throw new ConfigError(`${name} names ${JSON.stringify(twice)} twice`);
    return paths;
  },
  show: () => '—',
};

/** Comma-separated `type=procedure` or `type=schema.procedure`. */
export const procedureList: Kind<ProcedureEntry[]> = {
  type: 'list of `type=[schema.]procedure`',
  schema: Type.Array(Type.String({ pattern: '^[a-z][a-z0-9_.-]*=([A-Za-z0-9_$]+\\.)?[A-Za-z0-9_$]+$' })),
  read(text, name) {
    const seen = new Set<string>();
    return text
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '')
      .map((entry) => {
        const [type = '', procedure = '', ...rest] = entry.split('=').map((part) => part.trim());
        const match = PROCEDURE.exec(procedure);
        if (rest.length > 0 || match === null) {
          throw new ConfigError(`${name} entries are type=procedure or type=schema.procedure, got ${JSON.stringify(entry)}`);
        }
        if (!TYPE.test(type)) {
          throw new ConfigError(
            `${name}: ${JSON.stringify(type)} is not a task type name (a lower-case letter, then a-z 0-9 _ . -, 64 at most)`,
          );
        }
        if (seen.has(type)) throw new ConfigError(`${name} declares the type ${type} twice`);
        seen.add(type);
        return { type, schema: match[1], name: match[2]! };
      });
  },
  show: () => '—',
};

/** A column: an unquoted MySQL identifier. */
const COLUMN = /^[A-Za-z0-9_$]{1,64}$/;

/**
 * CLOSE_ORDER: where close_order finds the shop's orders and stock, a JSON object whose fields
 * each default to the write-ups' schema (DEFAULT_CLOSE_ORDER): table, key, status, unpaid, closed,
 * closedAt (null: not stamped) and stock (null: no stock put back; else items, itemGoods, itemNum,
 * goods, goodsId, column).
 */
export const closeOrderMapping: Kind<CloseOrderMapping> = {
  type: 'JSON object (table, key, status, unpaid, closed, closedAt, stock)',
  schema: Type.Object({}, { additionalProperties: true }),
  read(text, name) {
    let given: unknown;
    try {
      given = JSON.parse(text);
    } catch {
      throw new ConfigError(`${name} must be a JSON object, e.g. {"table":"shop_orders","key":"sn","unpaid":0,"closed":9,"stock":null}`);
    }
    if (given === null || typeof given !== 'object' || Array.isArray(given)) throw new ConfigError(`${name} must be a JSON object`);
    const fields = given as Record<string, unknown>;
    const base = DEFAULT_CLOSE_ORDER;
    const known = ['table', 'key', 'status', 'unpaid', 'closed', 'closedAt', 'stock'];
    const unknown = Object.keys(fields).filter((field) => !known.includes(field));
    if (unknown.length > 0) throw new ConfigError(`${name} has no field ${unknown.join(', ')} (it has ${known.join(', ')})`);
    const name_ = (field: string, value: unknown, fallback: string, pattern: RegExp): string => {
      if (value === undefined) return fallback;
      if (typeof value !== 'string' || !pattern.test(value))
        throw new ConfigError(
          `${name}: ${field} must be a MySQL name (letters, digits, _ and $)${pattern === PROCEDURE ? ', or schema.name' : ''}`,
        );
      return value;
    };
    const status = (field: string, value: unknown, fallback: string | number): string | number => {
      if (value === undefined) return fallback;
      if ((typeof value === 'string' && value.length > 0 && value.length <= 64) || Number.isSafeInteger(value))
        return value as string | number;
      throw new ConfigError(`${name}: ${field} must be the status value as stored, a string or an integer`);
    };
    let stock: CloseOrderMapping['stock'] = base.stock;
    if (fields.stock === null) stock = null;
    else if (fields.stock !== undefined) {
      if (typeof fields.stock !== 'object' || Array.isArray(fields.stock))
        throw new ConfigError(
          `${name}: stock must be null (no stock put back) or an object (items, itemGoods, itemNum, goods, goodsId, column)`,
        );
      const given = fields.stock as Record<string, unknown>;
      const fallback = base.stock!;
      const stockFields = ['items', 'itemGoods', 'itemNum', 'goods', 'goodsId', 'column'];
      const odd = Object.keys(given).filter((field) => !stockFields.includes(field));
      if (odd.length > 0) throw new ConfigError(`${name}: stock has no field ${odd.join(', ')} (it has ${stockFields.join(', ')})`);
      const item = (field: 'itemGoods' | 'itemNum') => {
        const value = given[field];
        if (value === undefined) return fallback[field];
        if (typeof value !== 'string' || value.length === 0 || value.length > 64)
          throw new ConfigError(`${name}: stock.${field} must be a JSON field name`);
        return value;
      };
      stock = {
        items: name_('stock.items', given.items, fallback.items, COLUMN),
        itemGoods: item('itemGoods'),
        itemNum: item('itemNum'),
        goods: name_('stock.goods', given.goods, fallback.goods, PROCEDURE),
        goodsId: name_('stock.goodsId', given.goodsId, fallback.goodsId, COLUMN),
        column: name_('stock.column', given.column, fallback.column, COLUMN),
      };
    }
    return {
      table: name_('table', fields.table, base.table, PROCEDURE),
      key: name_('key', fields.key, base.key, COLUMN),
      status: name_('status', fields.status, base.status, COLUMN),
      unpaid: status('unpaid', fields.unpaid, base.unpaid),
      closed: status('closed', fields.closed, base.closed),
      closedAt: fields.closedAt === null ? null : name_('closedAt', fields.closedAt, base.closedAt!, COLUMN),
      stock,
    };
  },
  show: () => "the write-ups' orders and goods (docs/handlers.md#close_order)",
};
