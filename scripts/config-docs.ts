/**
 * `npm run docs:config`: rewrites the generated part of docs/configuration.md (between its
 * config markers) from the configuration table in src/app/config-table.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { withConfigTables } from '../src/app/config-docs.js';

const path = new URL('../docs/configuration.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = withConfigTables(before);
if (after !== before) writeFileSync(path, after);
process.stdout.write(
  after === before ? 'docs/configuration.md is up to date\n' : 'docs/configuration.md rewritten from the configuration table\n',
);
