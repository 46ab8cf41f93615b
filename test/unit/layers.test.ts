/**
 * The layer check (`npm run layers`, dependency-cruiser with .dependency-cruiser.cjs) run on small
 * trees of its own, so that each rule is seen to fail on the import it forbids, and to pass on
 * the imports it allows. The real src/ is checked by `npm run layers`, part of `npm test`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IConfiguration } from 'dependency-cruiser';
import { afterEach, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const config = createRequire(import.meta.url)(join(root, '.dependency-cruiser.cjs')) as IConfiguration;

const trees: string[] = [];
afterEach(() => {
  for (const tree of trees.splice(0)) rmSync(tree, { recursive: true, force: true });
});

/** Cruises `src/` of `dir` (the rules' paths are relative to the working folder). */
async function check(dir: string): Promise<string[]> {
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    const { output } = await cruise(['src'], {
      ...config.options,
      ruleSet: { forbidden: config.forbidden },
      tsConfig: { fileName: join(dir, 'tsconfig.json') },
      validate: true,
    });
    const { summary } = output as ICruiseResult;
    return summary.violations.map((violation) => `${violation.rule.name}: ${violation.from} → ${violation.to}`);
  } finally {
    process.chdir(cwd);
  }
}

/** A tree of files: path → source. Each gets a tsconfig like the project's. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'punctual-layers-'));
  trees.push(dir);
  const all = {
    'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
    'package.json': JSON.stringify({ type: 'module' }),
    'src/app/main.ts': "import './service.js';\n",
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe('the layer check', () => {
  it('passes on imports that go down the layers', async () => {
    const dir = tree({
      'src/app/service.ts': "import { open } from '../db/connection.js';\nexport const service = open;\n",
      'src/db/connection.ts': "import { sleep } from '../util/async.js';\nexport const open = sleep;\n",
      'src/util/async.ts': 'export const sleep = 1;\n',
    });
    expect(await check(dir)).toEqual([]);
  });

  it('fails on an import up the layers', async () => {
    const dir = tree({
      'src/app/service.ts': "import { open } from '../db/connection.js';\nexport const service = open;\n",
      'src/app/config.ts': 'export const config = 1;\n',
      'src/db/connection.ts': "import { config } from '../app/config.js';\nexport const open = config;\n",
    });
    expect(await check(dir)).toEqual(['layer-db: src/db/connection.ts → src/app/config.ts']);
  });

  it('fails on a file cycle inside a folder', async () => {
    const dir = tree({
      'src/app/service.ts': "import { a } from '../store/a.js';\nexport const service = a;\n",
      'src/store/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'src/store/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
    });
    expect(await check(dir)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^no-circular: src\/store\/a\.ts → src\/store\/b\.ts$/)]),
    );
  });

  it('fails on a loose file at the root of src/, on a contract that imports the server, and on dead files', async () => {
    const dir = tree({
      'src/app/service.ts': "import { schema } from '../contract/tasks.js';\nimport { x } from '../loose.js';\nexport const service = [schema, x];\n",
      'src/loose.ts': "import { sleep } from './util/async.js';\nexport const x = sleep;\n",
      'src/util/async.ts': 'export const sleep = 1;\n',
      'src/contract/tasks.ts': "import { sleep } from '../util/async.js';\nexport const schema = sleep;\n",
      'src/store/unused.ts': 'export const unused = 1;\n',
    });
    const found = await check(dir);
    expect(found).toEqual(
      expect.arrayContaining([
        'src-in-folders: src/loose.ts → src/util/async.ts',
        'contract-imports-only-typebox: src/contract/tasks.ts → src/util/async.ts',
        'layer-contract-peers: src/contract/tasks.ts → src/util/async.ts',
        'no-orphans: src/store/unused.ts → src/store/unused.ts',
      ]),
    );
  });
});
