/**
 * Stored procedures as task types (invariant 11: new work without a fork, and invariant 4 on any
 * schema): `PROCEDURES=close_unpaid=shop.close_unpaid_order` makes `close_unpaid` a database
 * handler whose run is `CALL shop.close_unpaid_order(…)` on the task's completion transaction, so
 * the procedure's writes and the completion commit together or not at all.
 *
 * At start the procedure's IN parameters are read from information_schema.PARAMETERS and become
 * the payload's schema (names, types, lengths, all required, nothing else), so a bad create is a
 * 400 naming the field. Whether the database user may run it is asked by a CALL with one argument
 * too many: the server checks the EXECUTE privilege, then the argument count, and so answers
 * "denied" or "wrong count" without running a statement of the procedure.
 *
 * A `SIGNAL SQLSTATE '45000'` is a permanent failure carrying its message; a deadlock or lock wait
 * goes up untouched (retried without using an attempt, error-kind.ts); any other error retries
 * with backoff. See docs/handlers.md#stored-procedures.
 */
import type mysql from 'mysql2/promise';
import { Type, type TSchema } from 'typebox';
import type { Database } from '../db/connection.js';
import { type DatabaseHandler, PermanentError } from './handler.js';

/** One entry of PROCEDURES: a task type and the procedure it calls. */
export interface ProcedureEntry {
  type: string;
  /** Undefined: the schema of DATABASE_URL. */
  schema: string | undefined;
  name: string;
}

/** A procedure that cannot be a task type: stops the start with one line. */
export class ProcedureError extends Error {
  override name = 'ProcedureError';
}

const SQL = {
  routine:
    "SELECT ROUTINE_SCHEMA AS routineSchema, ROUTINE_NAME AS routineName FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'",
  parameters:
    'SELECT PARAMETER_NAME AS name, PARAMETER_MODE AS mode, DATA_TYPE AS dataType, DTD_IDENTIFIER AS declared, ' +
    'CHARACTER_MAXIMUM_LENGTH AS maxLength, NUMERIC_PRECISION AS numericPrecision, NUMERIC_SCALE AS numericScale ' +
    "FROM information_schema.PARAMETERS WHERE SPECIFIC_SCHEMA = ? AND SPECIFIC_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE' ORDER BY ORDINAL_POSITION",
} as const;

const ER_SP_DOES_NOT_EXIST = 1305;
const ER_SP_WRONG_NO_OF_ARGS = 1318;
const ER_PROCACCESS_DENIED_ERROR = 1370;

interface ParameterRow extends mysql.RowDataPacket {
  name: string;
  mode: string;
  dataType: string;
  declared: string;
  maxLength: number | string | null;
  numericPrecision: number | string | null;
  numericScale: number | string | null;
}

const quote = (identifier: string) => `\`${identifier.replace(/`/g, '``')}\``;

const INTEGER_BITS: Record<string, number> = { tinyint: 8, smallint: 16, mediumint: 24, int: 32, integer: 32, bigint: 64 };
const STRINGS = new Set([
  'char',
  'varchar',
  'tinytext',
  'text',
  'mediumtext',
  'longtext',
  'binary',
  'varbinary',
  'tinyblob',
  'blob',
  'mediumblob',
  'longblob',
  'set',
  'json',
  'uuid',
  'inet4',
  'inet6',
]);
const DATE = '^\\d{4}-\\d{2}-\\d{2}$';
const DATETIME = '^\\d{4}-\\d{2}-\\d{2}[ T]\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?$';
const TIME = '^-?\\d{1,3}:\\d{2}:\\d{2}(\\.\\d{1,6})?$';

/** The values of an `enum('a','b')` declaration. */
function enumValues(declared: string): string[] {
  const inner = /^enum\((.*)\)/i.exec(declared)?.[1] ?? '';
  return [...inner.matchAll(/'((?:[^']|'')*)'/g)].map((match) => match[1]!.replace(/''/g, "'"));
}

/** The JSON Schema of one IN parameter, or why punctual cannot pass it. */
export function parameterSchema(
  row: Pick<ParameterRow, 'dataType' | 'declared' | 'maxLength' | 'numericPrecision' | 'numericScale'>,
): TSchema | string {
  const type = row.dataType.toLowerCase();
  const description = `IN parameter ${row.declared}`;
  const bits = INTEGER_BITS[type];
  if (bits !== undefined) {
    const unsigned = /unsigned/i.test(row.declared);
    const minimum = unsigned ? 0 : Math.max(-(2 ** (bits - 1)), Number.MIN_SAFE_INTEGER);
    const maximum = Math.min(unsigned ? 2 ** bits - 1 : 2 ** (bits - 1) - 1, Number.MAX_SAFE_INTEGER);
    return Type.Integer({ minimum, maximum, description });
  }
  if (type === 'decimal' || type === 'numeric') {
    const digits = Number(row.numericPrecision ?? 10) - Number(row.numericScale ?? 0);
    const bound = 10 ** digits;
    return Type.Number({ exclusiveMinimum: -bound, exclusiveMaximum: bound, description });
  }
  if (type === 'float' || type === 'double' || type === 'real') return Type.Number({ description });
  if (type === 'bit') {
    const width = Number(/\((\d+)\)/.exec(row.declared)?.[1] ?? 1);
    return Type.Integer({ minimum: 0, maximum: Math.min(2 ** width - 1, Number.MAX_SAFE_INTEGER), description });
  }
  if (type === 'year') return Type.Integer({ minimum: 1901, maximum: 2155, description });
  if (type === 'enum')
    return Type.Union(
      enumValues(row.declared).map((value) => Type.Literal(value)),
      { description },
    );
  if (type === 'date') return Type.String({ pattern: DATE, description });
  if (type === 'datetime' || type === 'timestamp') return Type.String({ pattern: DATETIME, description });
  if (type === 'time') return Type.String({ pattern: TIME, description });
  if (STRINGS.has(type)) {
    const maxLength = row.maxLength === null ? undefined : Number(row.maxLength);
    return Type.String(maxLength === undefined ? { description } : { maxLength, description });
  }
  return `parameter type ${row.declared} cannot be passed from a JSON payload`;
}

/** `CALL` with the payload's fields as the IN parameters, in order. */
function procedureHandler(entry: ProcedureEntry, schema: string, parameters: ParameterRow[]): DatabaseHandler {
  const properties: Record<string, TSchema> = {};
  for (const parameter of parameters) {
    const property = parameterSchema(parameter);
    if (typeof property === 'string') throw new ProcedureError(`${describeEntry(entry)}: parameter ${parameter.name}: ${property}`);
    properties[parameter.name] = property;
  }
  const names = parameters.map((parameter) => parameter.name);
  const call = `CALL ${quote(schema)}.${quote(entry.name)}(${names.map(() => '?').join(', ')})`;
  return {
    type: entry.type,
    effect: 'database',
    payload: Type.Object(properties, { additionalProperties: false, description: `the IN parameters of ${schema}.${entry.name}` }),
    timeoutMs: 30_000,
    async run({ conn, payload }) {
      const values = names.map((name) => (payload as Record<string, unknown>)[name]);
      try {
        await conn.query(call, values);
      } catch (error) {
        const e = error as { errno?: number; sqlState?: string; sqlMessage?: string };
        // SIGNAL SQLSTATE '45000': the procedure says no retry can fix it.
        if (e.sqlState === '45000') throw new PermanentError(e.sqlMessage ?? 'the procedure signalled 45000', { cause: error });
        throw error;
      }
      return 'called';
    },
  };
}

function describeEntry(entry: ProcedureEntry): string {
  return `PROCEDURES: ${entry.type}=${entry.schema === undefined ? '' : `${entry.schema}.`}${entry.name}`;
}

/** Whether the user may EXECUTE the procedure, asked without running it: a CALL with one argument too many. */
async function probe(conn: mysql.PoolConnection, schema: string, name: string, count: number): Promise<number | undefined> {
  try {
    await conn.query(`CALL ${quote(schema)}.${quote(name)}(${Array.from({ length: count + 1 }, () => 'NULL').join(', ')})`);
    return undefined;
  } catch (error) {
    return (error as { errno?: number }).errno;
  }
}

/**
 * The handlers of PROCEDURES, read from the database: each procedure's IN parameters become its
 * payload schema. Throws a ProcedureError naming the entry when a procedure is missing, may not
 * be executed, or has a parameter punctual cannot pass.
 */
export async function procedureHandlers(
  database: Database,
  entries: readonly ProcedureEntry[],
  defaultSchema: string,
): Promise<DatabaseHandler[]> {
  if (entries.length === 0) return [];
  return database.withConnection(async (conn) => {
    const handlers: DatabaseHandler[] = [];
    for (const entry of entries) {
      const schema = entry.schema ?? defaultSchema;
      const qualified = `${schema}.${entry.name}`;
      const [routines] = await conn.query<mysql.RowDataPacket[]>(SQL.routine, [schema, entry.name]);
      const [parameters] = await conn.query<ParameterRow[]>(SQL.parameters, [schema, entry.name]);
      const answer = await probe(conn, schema, entry.name, parameters.length);
      const grant = `GRANT EXECUTE ON PROCEDURE ${qualified} TO the user of DATABASE_URL`;
      if (answer === ER_SP_DOES_NOT_EXIST) throw new ProcedureError(`${describeEntry(entry)}: procedure ${qualified} does not exist`);
      if (answer === ER_PROCACCESS_DENIED_ERROR) {
        throw new ProcedureError(
          `${describeEntry(entry)}: the database user may not EXECUTE procedure ${qualified} (or it does not exist): ${grant}`,
        );
      }
      if (routines.length === 0 || answer !== ER_SP_WRONG_NO_OF_ARGS) {
        throw new ProcedureError(
          `${describeEntry(entry)}: procedure ${qualified} cannot be read or called (${answer === undefined ? 'no answer' : `error ${answer}`}): ${grant}`,
        );
      }
      const notIn = parameters.find((parameter) => parameter.mode !== 'IN');
      if (notIn !== undefined) {
        throw new ProcedureError(
          `${describeEntry(entry)}: parameter ${notIn.name} is ${notIn.mode}: a task's procedure takes IN parameters only`,
        );
      }
      handlers.push(procedureHandler(entry, schema, parameters));
    }
    return handlers;
  });
}
