/**
 * What a shop gets from installing @punctual/client: the packed client in an empty project pulls
 * in typebox and nothing else; its types check under `tsc --strict` without skipLibCheck, so no
 * type of the server (drizzle's, mysql2's, Node's) is reachable from them; and the built
 * JavaScript calls a real punctual from plain Node.
 *
 * Slow on purpose: it packs (which builds) and installs from the registry, as a user would.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../helpers/handler-package.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT = join(ROOT, 'clients', 'ts');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const TOKEN = 'package-token-0123456789ab';

let project: string;
let packed: { filename: string; files: { path: string }[] };

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'punctual-client-'));
  // npm pack runs the package's prepack, which builds it.
  [packed] = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', project], CLIENT));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'shop', version: '1.0.0', private: true, type: 'module' }));
  await run('npm', ['install', '--no-audit', '--no-fund', join(project, packed.filename)], project);
}, 300_000);

afterAll(() => {
  if (project !== undefined) rmSync(project, { recursive: true, force: true });
});

describe('the @punctual/client package', () => {
  it('holds the client and the contract, built, and nothing of the server', () => {
    const paths = packed.files.map((file) => file.path).sort();
    expect(paths.filter((path) => !/^dist\/(clients\/ts\/src|src\/contract)\/[\w-]+\.(js|d\.ts)$/.test(path))).toEqual([
      'README.md',
      'package.json',
    ]);
    expect(paths).toContain('dist/clients/ts/src/client.d.ts');
    expect(paths).toContain('dist/src/contract/index.js');
  });

  it('installs into an empty project with typebox alone', () => {
    const lock = JSON.parse(readFileSync(join(project, 'node_modules', '.package-lock.json'), 'utf8'));
    expect(Object.keys(lock.packages).sort()).toEqual(['node_modules/@punctual/client', 'node_modules/typebox']);
  });

  it('type-checks a shop’s code under tsc --strict without skipLibCheck', async () => {
    writeFileSync(
      join(project, 'shop.ts'),
      `import { PunctualClient, PunctualError, defineHandler, type ClusterView, type Task } from '@punctual/client';
import { Type } from 'typebox';
import { CreateTaskBody, TASK_STATUSES } from '@punctual/client/contract';

const punctual = new PunctualClient({ baseUrl: 'http://127.0.0.1:3000', token: 'secret' });

// Each answer is inferred, not annotated (an annotation would hide a call that answers any), and each
// line under a @ts-expect-error is an error only while the types are the API's: an unused one fails.
const { task, created } = await punctual.create({ type: 'close_order', payload: { orderSn: 'SN1' }, delayMs: 60_000, key: 'close_order:SN1' });
// @ts-expect-error a task's id is a number
const id: string = task.id;
// @ts-expect-error misfire is run or skip
await punctual.create({ type: 'close_order', misfire: 'later' });

const cancelled = await punctual.cancelByKey('close_order:SN1');
const status: (typeof TASK_STATUSES)[number] = cancelled.status;
// @ts-expect-error a task's status is one of TASK_STATUSES
const paid: 'paid' = cancelled.status;

const view = await punctual.cluster();
const shards: number = view.members.reduce((sum, member) => sum + member.shards, 0);
// @ts-expect-error a cluster member has no host
view.members[0]?.host;

try {
  await punctual.cancelByKey('close_order:SN1');
} catch (error) {
  const now: Task | undefined = error instanceof PunctualError && error.status === 409 ? error.task : undefined;
  console.log(now?.status);
}
const views: ClusterView[] = [view];

// A handler's context is typed by its payload schema; defineHandler returns the object unchanged.
const handler = defineHandler({
  type: 'expire_coupon',
  effect: 'database',
  payload: Type.Object({ couponId: Type.Integer() }),
  async run({ payload, tx, task }) {
    // @ts-expect-error the payload's couponId is a number
    const wrong: string = payload.couponId;
    await tx.query('SELECT ?', [payload.couponId, task.attempt, wrong]);
  },
});
// @ts-expect-error an effect is 'database' or 'outside'
defineHandler({ type: 'x', effect: 'somewhere', payload: Type.Object({}), async run() {} });
console.log(handler.type);
console.log(created, id, status, paid, shards, views, Object.keys(CreateTaskBody.properties));
`,
    );
    // The README's examples are a shop's code too. The project has no @types/node, to show the client
    // needs none; this line stands in for it where an example reads process.env.
    const readme = readFileSync(join(CLIENT, 'README.md'), 'utf8');
    const node = 'declare const process: { env: Record<string, string | undefined>; once(event: string, listener: () => void): void };\n';
    const examples = [...readme.matchAll(/```ts\n([^]*?)```/g)].map(([, code], i) => {
      writeFileSync(join(project, `readme-${i}.ts`), `${code!.includes('process.') ? node : ''}${code!}`);
      return `readme-${i}.ts`;
    });
    expect(examples.length).toBeGreaterThanOrEqual(2);
    const args = ['--strict', '--noEmit', '--skipLibCheck', 'false', '--module', 'nodenext', '--target', 'es2022'];
    await run(process.execPath, [TSC, ...args, 'shop.ts', ...examples], project);
  }, 180_000);

  describe('against a real punctual', () => {
    let db: TestDatabase;
    let service: TestService;
    let baseUrl: string;

    beforeAll(async () => {
      db = await createTestDatabase('client_package');
      service = await startTestService(db, { API_TOKEN: TOKEN, PORT: '0' });
      baseUrl = await service.start();
    });

    afterAll(async () => {
      await service?.stop();
      await db?.drop();
    });

    it('creates, cancels by key and reads the cluster from plain Node', async () => {
      writeFileSync(
        join(project, 'close.mjs'),
        `import { PunctualClient } from '@punctual/client';
const punctual = new PunctualClient({ baseUrl: process.env.PUNCTUAL_URL, token: process.env.PUNCTUAL_TOKEN });
const { task, created } = await punctual.create({ type: 'close_order', payload: { orderSn: 'PKG1' }, delayMs: 3_600_000, key: 'close_order:PKG1' });
const cancelled = await punctual.cancelByKey('close_order:PKG1');
const cluster = await punctual.cluster();
console.log(JSON.stringify({ id: task.id, created, status: cancelled.status, self: cluster.self }));
`,
      );
      const output = await run(process.execPath, ['close.mjs'], project, { PUNCTUAL_URL: baseUrl, PUNCTUAL_TOKEN: TOKEN });
      const answer = JSON.parse(output);
      expect(answer).toMatchObject({ created: true, status: 'cancelled', self: expect.any(String) });
      const rows = await db.query("SELECT id, status FROM punctual_tasks WHERE task_key = 'close_order:PKG1'");
      expect(rows).toEqual([{ id: answer.id, status: 'cancelled' }]);
    });
  });
});
