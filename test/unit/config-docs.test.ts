/**
 * docs/configuration.md says what the code reads: its generated part is exactly what the
 * configuration table generates (`npm run docs:config` rewrites it), it has a row for every
 * variable, and the configuration reads no variable that is not in the table.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { END_MARKER, renderConfigTables, START_MARKER, withConfigTables } from '../../src/app/config-docs.js';
import { VARIABLES } from '../../src/app/config-table.js';

const docs = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

/** The names loadConfig looks up in `env`. */
function namesRead(env: Record<string, string>): Set<string> {
  const read = new Set<string>();
  const spy = new Proxy(env, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return target[name as string];
    },
  });
  loadConfig(spy);
  return read;
}

describe('docs/configuration.md', () => {
  it('holds the tables the configuration table generates (run `npm run docs:config` after a change)', () => {
    expect(docs).toContain(START_MARKER);
    expect(docs).toContain(END_MARKER);
    expect(docs.slice(docs.indexOf(START_MARKER), docs.indexOf(END_MARKER) + END_MARKER.length)).toBe(
      `${START_MARKER}\n${renderConfigTables()}\n${END_MARKER}`,
    );
    expect(withConfigTables(docs)).toBe(docs);
  });

  it('has a row for every setting the service reads, and the service reads only those', () => {
    // A secret readable from a file is also read as <NAME>_FILE; the docs say so in its row.
    const fileNames = Object.entries(VARIABLES).flatMap(([name, variable]) => ('fromFile' in variable ? [`${name}_FILE`] : []));
    const names = Object.keys(VARIABLES);
    expect(names.length).toBeGreaterThan(40);
    for (const name of names) expect(docs, name).toContain(`| \`${name}\` |`);
    for (const name of fileNames) expect(docs, name).toContain(`\`${name}\``);
    const everySet = Object.fromEntries(names.map((name) => [name, '']));
    for (const env of [{}, everySet, { SHARDING: 'on', API_TOKEN: 'a-token-of-enough-length', HOST: '0.0.0.0' }]) {
      expect([...namesRead(env)].filter((name) => !names.includes(name) && !fileNames.includes(name))).toEqual([]);
    }
  });
});
