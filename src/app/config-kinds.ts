/**
 * The kinds of value an environment variable holds, each written once: how its text is read,
 * the TypeBox schema the value must meet, how the docs name the kind and show a default.
 *
 * A bad value throws a ConfigError of one line naming the variable. A kind that holds a secret
 * (tokens, keys) never puts the text in its message; the others quote it, so the operator sees
 * what was read.
 */
import { readFileSync } from 'node:fs';
import { Type, type TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { parseDatabaseUrl, DatabaseUrlError } from '../db/hosts.js';
import { redactCredentials } from '../observability/redact.js';
import { canonicalZone } from '../time/zones.js';
import { parseTargets, TargetSpecError, type TargetSpec } from '../targets/spec.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface Kind<T> {
  /** What the docs call it. */
  readonly type: string;
  /** The value's JSON Schema (for a list, each entry's; for host keys, the record form). */
  readonly schema: TSchema;
  /** Reads the variable's text (trimmed, never empty); throws a ConfigError naming `name`. */
  read(text: string, name: string): T;
  /** A default as the docs show it. */
  show(value: T): string;
}

const code = (text: string | number) => `\`${text}\``;

/** A host name, an IPv4 address or an IPv6 literal in brackets, lower case. */
const HOST = String.raw`(\[[0-9a-f:.]+\]|[a-z0-9.-]+)`;
const PORT = String.raw`(:\d{1,5})`;

export function integer(minimum: number, maximum: number): Kind<number> {
  const schema = Type.Integer({ minimum, maximum });
  return {
    type: `integer, ${minimum} – ${maximum}`,
    schema,
    read(text, name) {
      const quoted = /^-?\d+$/.test(text) ? text : JSON.stringify(text);
      const value = Number(text);
      if (quoted !== text || !Number.isSafeInteger(value) || !Value.Check(schema, value)) {
        throw new ConfigError(`${name} must be an integer between ${minimum} and ${maximum}, got ${quoted}`);
      }
      return value;
    },
    show: (value) => code(value),
  };
}

const UNITS: [ms: number, unit: string][] = [
  [24 * 3600_000, 'days'],
  [3600_000, 'h'],
  [60_000, 'min'],
  [1000, 's'],
];

/** "(10 min)", "(7 days)" for a default of a minute or more; nothing below. */
function spelledOut(ms: number): string {
  if (ms < 60_000) return '';
  const [size, unit] = UNITS.find(([size]) => ms % size === 0) ?? [1, 'ms'];
  const count = ms / size;
  return ` (${count} ${count === 1 && unit === 'days' ? 'day' : unit})`;
}

/** An integer number of milliseconds; its defaults are spelled out in the docs. */
export function milliseconds(minimum: number, maximum: number): Kind<number> {
  return { ...integer(minimum, maximum), type: `ms, ${minimum} – ${maximum}`, show: (value) => `${code(value)}${spelledOut(value)}` };
}

/** `auto` (the service works the value out itself) or a value of `kind`. */
export function autoOr<T>(kind: Kind<T>): Kind<T | 'auto'> {
  return {
    type: `\`auto\` or ${kind.type}`,
    schema: Type.Union([Type.Literal('auto'), kind.schema]),
    read: (text, name) => (text.toLowerCase() === 'auto' ? 'auto' : kind.read(text, name)),
    show: (value) => (value === 'auto' ? code('auto') : kind.show(value)),
  };
}

export const text: Kind<string> = {
  type: 'text',
  schema: Type.String(),
  read: (value) => value,
  show: (value) => code(value),
};

/** A token or key: never quoted in a message. */
export function secret(minLength = 1): Kind<string> {
  const schema = Type.String({ minLength });
  return {
    type: minLength > 1 ? `secret, ≥ ${minLength} characters` : 'secret',
    schema,
    read(value, name) {
      if (!Value.Check(schema, value)) throw new ConfigError(`${name} must be at least ${minLength} characters long`);
      return value;
    },
    show: () => '—',
  };
}

/** What reading `path` failed with, as one line: the error code (ENOENT, EACCES, …) and what it means. */
export function unreadable(name: string, path: string, error: unknown): ConfigError {
  const code = (error as { code?: string }).code ?? 'error';
  const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'a directory' : code;
  return new ConfigError(`${name}: cannot read ${JSON.stringify(path)} (${why})`);
}

/** The path of a file, read at start: its content is the value (a PEM file, say). */
export const file: Kind<{ path: string; content: Buffer }> = {
  type: 'file path',
  schema: Type.Object({ path: Type.String() }),
  read(path, name) {
    try {
      return { path, content: readFileSync(path) };
    } catch (error) {
      throw unreadable(name, path, error);
    }
  },
  show: () => '—',
};

/** One of a few words, in any case. */
export function oneOf<const Word extends string>(words: readonly Word[]): Kind<Word> {
  const schema = Type.Union(words.map((word) => Type.Literal(word)));
  return {
    type: words.map(code).join(', '),
    schema,
    read(value, name) {
      const word = value.toLowerCase();
      if (!Value.Check(schema, word)) throw new ConfigError(`${name} must be one of ${words.join(', ')}, got ${JSON.stringify(word)}`);
      return word;
    },
    show: (value) => code(value),
  };
}

/** `on` or `off`, in any case. */
export const onOff: Kind<boolean> = {
  type: '`on`, `off`',
  schema: Type.Boolean(),
  read(value, name) {
    const word = value.toLowerCase();
    if (word !== 'on' && word !== 'off') throw new ConfigError(`${name} must be on or off, got ${JSON.stringify(word)}`);
    return word === 'on';
  },
  show: (value) => code(value ? 'on' : 'off'),
};

/** An IANA time zone, in Temporal's spelling ("asia/shanghai" → "Asia/Shanghai"). */
export const zone: Kind<string> = {
  type: 'IANA time zone',
  schema: Type.String(),
  read(value, name) {
    const zone = canonicalZone(value);
    if (zone === undefined) {
      throw new ConfigError(`${name} must be an IANA time zone such as Asia/Shanghai or UTC, got ${JSON.stringify(value)}`);
    }
    return zone;
  },
  show: (value) => code(value),
};

/** The database a `mysql://` URL names (letters, digits, _ or $). */
export function databaseNameOf(url: string): string {
  let parsed: URL;
  try {
    // Several hosts (host1:port,host2:port) are checked one by one; the rest is the same for all.
    const { urls } = parseDatabaseUrl(url);
    for (const hostUrl of urls.slice(1)) new URL(hostUrl);
    parsed = new URL(urls[0]!);
  } catch (error) {
    // The text may hold a password: show it only with credentials masked.
    const shown = JSON.stringify(redactCredentials(url));
    if (error instanceof DatabaseUrlError && !error.message.includes('is not a URL')) {
      throw new ConfigError(`${error.message}, in ${shown}`);
    }
    throw new ConfigError(`DATABASE_URL is not a URL (mysql://user:password@host:port/database): ${shown}`);
  }
  if (parsed.protocol !== 'mysql:') {
    throw new ConfigError(`DATABASE_URL must start with mysql://, got ${JSON.stringify(parsed.protocol)}`);
  }
  const name = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_$]{1,64}$/.test(name)) {
    throw new ConfigError(
      `DATABASE_URL must name a database made of letters, digits, _ or $ (e.g. mysql://root@127.0.0.1:3306/punctual), got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** A `mysql://` URL with one host or several, naming its database. */
export const databaseUrl: Kind<string> = {
  type: '`mysql://` URL',
  schema: Type.String({ pattern: '^mysql://' }),
  read(value) {
    databaseNameOf(value);
    return value;
  },
  show: (value) => code(value),
};

/** Comma-separated, trimmed, lower case, empty entries dropped. */
function entries(value: string): string[] {
  return value
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '');
}

/** Comma-separated `host` (any port) or `host:port`, lower case; IPv6 literals in brackets. */
export const hosts: Kind<string[]> = (() => {
  const schema = Type.String({ pattern: `^${HOST}${PORT}?$` });
  return {
    type: 'list of `host` or `host:port`',
    schema,
    read(value, name) {
      return entries(value).map((entry) => {
        if (!Value.Check(schema, entry)) throw new ConfigError(`${name} entries must be host or host:port, got ${JSON.stringify(entry)}`);
        return entry;
      });
    },
    show: () => '—',
  };
})();

/** Comma-separated host names without a port, lower case. */
export const hostNames: Kind<string[]> = (() => {
  const schema = Type.String({ pattern: `^${HOST}$` });
  return {
    type: 'list of host names',
    schema,
    read(value, name) {
      return entries(value).map((entry) => {
        if (!Value.Check(schema, entry)) {
          throw new ConfigError(`${name} entries must be host names without a port, got ${JSON.stringify(entry)}`);
        }
        return entry;
      });
    },
    show: () => '—',
  };
})();

/** Comma-separated `host=key` or `host:port=key`, keys of at least 16 characters. */
export const hostKeys: Kind<Map<string, string>> = (() => {
  const schema = Type.Record(Type.String({ pattern: `^${HOST}${PORT}?$` }), Type.String({ minLength: 16 }));
  return {
    type: 'list of `host=key` or `host:port=key`, keys ≥ 16 characters',
    schema,
    read(value, name) {
      const keys = new Map<string, string>();
      for (const entry of value.split(',')) {
        if (entry.trim() === '') continue;
        const at = entry.indexOf('=');
        const host = entry.slice(0, Math.max(at, 0)).trim().toLowerCase();
        const key = entry.slice(at + 1).trim();
        if (at < 1 || !Value.Check(schema, { [host]: key })) {
          // Never echo the entry: it holds a key.
          throw new ConfigError(`${name} entries must be host=key or host:port=key with a key of at least 16 characters`);
        }
        keys.set(host, key);
      }
      return keys;
    },
    show: () => '—',
  };
})();

/** Comma-separated tokens, each at least 16 printable ASCII characters without spaces or commas. */
export const tokens: Kind<string[]> = (() => {
  const schema = Type.String({ minLength: 16, pattern: '^[\\x21-\\x7e]+$' });
  return {
    type: 'list of secrets, each ≥ 16 characters',
    schema,
    read(value, name) {
      return value.split(',').map((entry, index) => {
        const token = entry.trim();
        if (!Value.Check(schema, token)) {
          // The position, never the token.
          throw new ConfigError(
            `${name} entry ${index + 1} must be at least 16 printable characters without spaces (the tokens are comma-separated)`,
          );
        }
        return token;
      });
    },
    show: () => '—',
  };
})();

/** Comma-separated task type names (letters, digits, `_ . : -`, up to 64), case kept, no repeats. */
export const typeNames: Kind<string[]> = (() => {
  const schema = Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,64}$' });
  return {
    type: 'list of task type names',
    schema,
    read(value, name) {
      const names = value
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== '');
      for (const entry of names) {
        if (!Value.Check(schema, entry)) {
          throw new ConfigError(
            `${name} entries must be type names of letters, digits, _ . : - (at most 64), got ${JSON.stringify(entry)}`,
          );
        }
      }
      const repeated = names.find((entry, index) => names.indexOf(entry) !== index);
      if (repeated !== undefined) throw new ConfigError(`${name} names ${JSON.stringify(repeated)} twice`);
      return names;
    },
    show: () => '—',
  };
})();

/** A token with a name and a role (API_TOKENS). */
export interface NamedToken {
  name: string;
  role: 'read' | 'write' | 'admin' | 'worker';
  token: string;
}

/**
 * Comma-separated `name:role:token` entries: the name is what the audit trail records for the
 * token's changes (letters, digits, `.`, `_`, `-`, at most 64), the role one of read, write,
 * admin, worker, the token at least 16 printable characters without spaces or commas.
 */
export const namedTokens: Kind<NamedToken[]> = (() => {
  const schema = Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}:(read|write|admin|worker):[\\x21-\\x2b\\x2d-\\x7e]{16,}$' });
  return {
    type: 'list of `name:role:token`',
    schema,
    read(value, name) {
      const entries = value.split(',').map((entry, index) => {
        const match = /^([A-Za-z0-9._-]{1,64}):(read|write|admin|worker):([\x21-\x7e]{16,})$/.exec(entry.trim());
        if (match === null) {
          // The position, never the entry: it holds a token.
          throw new ConfigError(
            `${name} entry ${index + 1} must be name:role:token (a name of letters, digits, . _ - up to 64; a role read, write, admin or worker; a token of at least 16 printable characters without spaces)`,
          );
        }
        return { name: match[1]!, role: match[2] as NamedToken['role'], token: match[3]! };
      });
      const names = new Set<string>();
      for (const entry of entries) {
        if (names.has(entry.name)) throw new ConfigError(`${name}: the name ${entry.name} is given twice; each token has its own name`);
        names.add(entry.name);
      }
      return entries;
    },
    show: () => '—',
  };
})();

/** TARGETS: `name=url#kind:destination`, comma-separated (src/targets/spec.ts); URLs hold credentials, so no message quotes one. */
export const targetList: Kind<TargetSpec[]> = {
  type: 'list of `name=url#stream:…`, `name=url#exchange:…/key` or `name=url#subject:…`',
  schema: Type.String(),
  read(value, name) {
    try {
      return parseTargets(value, name);
    } catch (error) {
      if (error instanceof TargetSpecError) throw new ConfigError(error.message);
      throw error;
    }
  },
  show: () => '—',
};
