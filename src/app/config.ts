/**
 * The configuration, read once at start from the environment by the table in config-table.ts:
 * each variable is read by its kind (a bad value throws a ConfigError naming it), a variable left
 * unset takes its default, then the rules that tie variables together are checked. main.ts
 * prints a ConfigError as one line and exits 1.
 *
 * The result is one slice per part of the service (database, http, scheduler, …): each part is
 * handed its own slice and never sees the rest.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, databaseNameOf, unreadable } from './config-kinds.js';
import { RULES, VARIABLES, type Derived, type Settings, type SliceName, type Variable } from './config-table.js';

export { ConfigError } from './config-kinds.js';
export { isLoopback } from './config-table.js';

/** Everything punctual reads from its environment, validated, one slice per part. */
export type Config = Omit<Settings, 'database'> & {
  /** `name`: the database DATABASE_URL names, created at start when missing. */
  database: Settings['database'] & { name: string };
};

type Env = Record<string, string | undefined>;

function isDerived(value: unknown): value is Derived<unknown> {
  return typeof value === 'object' && value !== null && 'compute' in value && 'from' in value;
}

/** The variable's text, trimmed; undefined when unset or blank. */
function textOf(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/**
 * The text of a secret that may come from a file: `<NAME>_FILE` names the file, whose content
 * (one trailing newline trimmed) is the value. Both at once is an error: which one wins would be a guess.
 */
function secretText(env: Env, name: string): string | undefined {
  const path = textOf(env, `${name}_FILE`);
  if (path === undefined) return textOf(env, name);
  if (textOf(env, name) !== undefined) throw new ConfigError(`${name} and ${name}_FILE are both set: set one of them`);
  let content: string;
  try {
    content = readFileSync(path, 'utf8');
  } catch (error) {
    throw unreadable(`${name}_FILE`, path, error);
  }
  const value = content.replace(/\r?\n$/, '');
  if (value.trim() === '') throw new ConfigError(`${name}_FILE: ${JSON.stringify(path)} is empty`);
  return value.trim();
}

/** Reads every variable of the table: its value, or its default when unset. */
function readTable(env: Env): Settings {
  const values = new Map<string, unknown>();
  const derived: [string, Derived<unknown>][] = [];
  const variables = Object.entries(VARIABLES) as [string, Variable][];
  for (const [name, variable] of variables) {
    const raw = variable.fromFile === true ? secretText(env, name) : textOf(env, name);
    if (raw !== undefined) values.set(name, variable.kind.read(raw, name));
    else if (isDerived(variable.default)) derived.push([name, variable.default]);
    else values.set(name, variable.default);
  }
  // Defaults computed from another variable, once that one is read (set or defaulted).
  for (const [name, { from, compute }] of derived) {
    if (!values.has(from)) throw new Error(`the default of ${name} reads ${from}, which is not a plain variable of the table`);
    values.set(name, compute(values.get(from) as never));
  }
  const slices: Partial<Record<SliceName, Record<string, unknown>>> = {};
  for (const [name, { slice, key }] of variables) (slices[slice] ??= {})[key] = values.get(name);
  return slices as Settings;
}

export function loadConfig(env: Env = process.env): Config {
  const settings = readTable(env);
  for (const rule of RULES) {
    const problem = rule.check(settings);
    if (problem !== undefined) throw new ConfigError(problem);
  }
  return {
    ...settings,
    database: { ...settings.database, name: databaseNameOf(settings.database.url) },
    // A longest delay shorter than the first would shrink the backoff: the first wins.
    retry: { ...settings.retry, maxMs: Math.max(settings.retry.baseMs, settings.retry.maxMs) },
  };
}
