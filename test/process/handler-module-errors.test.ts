/**
 * Every way a handler module can be wrong stops the start with one line on stderr naming the file
 * and the problem, and exit 1, before punctual listens or touches the database. The modules are
 * files in a temporary folder outside the repository.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFailure } from '../helpers/start-failure.js';

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'punctual-bad-modules-'));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const schema = `{ type: 'object', properties: { id: { type: 'integer' } }, additionalProperties: false }`;
const good = (type: string) => `{ type: '${type}', effect: 'database', payload: ${schema}, async run() {} }`;

/** [case, module source (undefined: no file), what the line says after the path]. */
const CASES: [string, string | undefined, RegExp][] = [
  ['a syntax error', `export default [ { type: 'x', effect: 'database', payload: ${schema}, run() {} ]`, /does not load: SyntaxError: /],
  ['a missing file', undefined, /: no such file$/],
  [
    'an import it cannot find',
    `import 'no-such-package-anywhere';\nexport default [${good('a_b')}];`,
    /does not load: .*no-such-package-anywhere/,
  ],
  ['a module that throws', `throw new Error('boom at load');`, /does not load: Error: boom at load$/],
  ['no default export', `export const handlers = [${good('a_b')}];`, /must export default an array of handlers, got no default export$/],
  ['a default that is not an array', `export default ${good('a_b')};`, /must export default an array of handlers, got object$/],
  ['a duplicate type in one module', `export default [${good('twice')}, ${good('twice')}];`, /type "twice" is declared twice$/],
  ['a type punctual already has', `export default [${good('close_order')}];`, /type "close_order" is already a task type/],
  ['a badly formed type name', `export default [${good('Close Order')}];`, /handler 1: type "Close Order" is not a task type name/],
  [
    'an effect punctual does not know',
    `export default [{ type: 'x', effect: 'somewhere', payload: ${schema}, async run() {} }];`,
    /handler "x": effect "somewhere" must be one of 'database', 'outside', 'worker'$/,
  ],
  [
    'a payload that is no schema',
    `export default [{ type: 'x', effect: 'database', payload: 'an object', async run() {} }];`,
    /handler "x": payload is not a JSON Schema object$/,
  ],
  [
    'a schema with a bogus type',
    `export default [{ type: 'x', effect: 'database', payload: { type: 'object', properties: { a: { type: 'text' } } }, async run() {} }];`,
    /handler "x": payload.properties.a.type "text" is not a JSON Schema type$/,
  ],
  [
    'a payload that is not an object schema',
    `export default [{ type: 'x', effect: 'database', payload: { type: 'string' }, async run() {} }];`,
    /payload must be a JSON Schema of type 'object'$/,
  ],
  [
    'run that is not a function',
    `export default [{ type: 'x', effect: 'outside', payload: ${schema}, run: 'later' }];`,
    /handler "x": run must be a function$/,
  ],
  [
    'a worker type with a run of its own',
    `export default [{ type: 'x', effect: 'worker', payload: ${schema}, async run() {} }];`,
    /handler "x": a worker type has no run, runBatch or timeoutMs/,
  ],
  [
    'a bad time limit',
    `export default [{ type: 'x', effect: 'outside', payload: ${schema}, timeoutMs: -1, async run() {} }];`,
    /handler "x": timeoutMs must be an integer/,
  ],
];

describe('a handler module that does not load', () => {
  it.each(CASES)('%s: one line naming the file and the problem, exit 1', async (name, source, says) => {
    const path = join(dir, `${name.replace(/\W+/g, '-')}.mjs`);
    if (source !== undefined) writeFileSync(path, source);
    // No database: a module is checked before punctual touches one.
    const { line } = await startFailure({ HANDLERS: path, DATABASE_URL: 'mysql://root@127.0.0.1:1/never', DB_WAIT_MS: '0' });
    expect(line.startsWith(`punctual: cannot start: HANDLERS: ${path}: `), line).toBe(true);
    expect(line).toMatch(says);
  });

  it('names the second module when the two declare one type', async () => {
    const first = join(dir, 'first.mjs');
    const second = join(dir, 'second.mjs');
    writeFileSync(first, `export default [${good('shared_type')}];`);
    writeFileSync(second, `export default [${good('shared_type')}];`);
    const { line } = await startFailure({
      HANDLERS: `${first},${second}`,
      DATABASE_URL: 'mysql://root@127.0.0.1:1/never',
      DB_WAIT_MS: '0',
    });
    expect(line).toBe(
      `punctual: cannot start: HANDLERS: ${second}: type "shared_type" is already a task type (built in, or from another module)`,
    );
  });
});
