/**
 * The kinds of the two variables that bring a shop's own work (docs/handlers.md): HANDLERS, a
 * list of module paths, and PROCEDURES, `type=procedure` pairs. Read like every other kind
 * (config-kinds.ts): a bad value is one ConfigError line naming the variable and the entry.
 */
import { Type } from 'typebox';
import { HANDLER_TYPE_PATTERN } from '../contract/handler-module.js';
import type { ProcedureEntry } from '../handlers/procedure.js';
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
