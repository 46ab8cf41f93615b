/**
 * A shop's own handlers from a module outside punctual's tree (HANDLERS), made by the test as a
 * package of its own that imports only the published helper. A database handler writes a ledger
 * row (effects, task_id PRIMARY KEY) in the completion transaction: through three kill -9s of
 * punctual mid-run, every task's effect is there exactly once. An outside handler sends its
 * idempotency key, the same on every attempt. Both are first-class types: /types, OpenAPI, metrics.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { makeHandlerPackage, type HandlerPackage } from '../helpers/handler-package.js';
import { createInBatches, killWhileRunning } from '../helpers/kill-loop.js';
import { createTasks, startServer, waitFor, type ServerProcess } from '../helpers/server.js';

const MODULE = `import { defineHandler } from '@punctual/client';

// Plain JSON Schemas: the module needs no TypeBox of its own.
export default [
  defineHandler({
    type: 'ledger_write',
    effect: 'database',
    payload: {
      type: 'object',
      properties: { note: { type: 'string', minLength: 1, maxLength: 32 } },
      required: ['note'],
      additionalProperties: false,
    },
    async run({ tx, payload, task }) {
      await tx.query('DO SLEEP(0.002)'); // a run takes a moment, so a kill lands inside some
      const written = await tx.query('INSERT INTO effects (task_id, note) VALUES (?, ?)', [task.id, payload.note]);
      return written.affectedRows === 1 ? 'written' : 'not written';
    },
  }),
  defineHandler({
    type: 'notify_outside',
    effect: 'outside',
    timeoutMs: 5000,
    payload: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'], additionalProperties: false },
    async run({ payload, idempotencyKey, task, signal }) {
      const answer = await fetch(payload.url, {
        method: 'POST',
        headers: { 'idempotency-key': idempotencyKey, 'x-task': String(task.id), 'x-attempt': String(task.attempt) },
        signal,
      });
      if (!answer.ok) throw new Error('the receiver answered ' + answer.status);
      return 'sent';
    },
  }),
];
`;

let db: TestDatabase;
let pkg: HandlerPackage;
let modulePath: string;

beforeAll(async () => {
  db = await createTestDatabase('handler_modules');
  await db.execute('CREATE TABLE effects (task_id BIGINT PRIMARY KEY, note VARCHAR(32) NOT NULL, at DATETIME(3) NOT NULL DEFAULT NOW(3))');
  pkg = await makeHandlerPackage();
  modulePath = pkg.write('handlers.mjs', MODULE);
}, 300_000);

afterAll(async () => {
  pkg?.remove();
  await db?.drop();
});

describe('a handler module', () => {
  it('writes each database effect exactly once through kill -9 mid-run', async () => {
    const env = { DATABASE_URL: db.url, HANDLERS: modulePath, CONCURRENCY: '4', BATCH_SIZE: '25' };
    let server: ServerProcess = await startServer({ env });
    const count = 1200;
    const due = Date.now() + 8000;
    const ids = await createInBatches(
      server,
      Array.from({ length: count }, (_, i) => ({
        type: 'ledger_write',
        payload: { note: `n${i}` },
        runAt: due + Math.floor((i * 6000) / count),
      })),
    );
    expect(Date.now()).toBeLessThan(due);
    const effects = async () => Number((await db.query<any[]>('SELECT COUNT(*) AS n FROM effects'))[0].n);
    const killed = await killWhileRunning(server, env, effects, count);
    server = killed.server;
    const { seenAtKill } = killed;
    try {
      await waitFor(
        async () =>
          Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND id IN (?)", [ids]))[0].n) === count,
        30_000,
        'every task to run',
      );
      // The kills landed while tasks were running: some effects before the first, not all before the last.
      expect(seenAtKill[2]).toBeLessThan(count); // the last kill came before the end
      const [ledger] = await db.query<any[]>(
        'SELECT COUNT(*) AS n, COUNT(DISTINCT task_id) AS tasks, MIN(task_id) AS low, MAX(task_id) AS high FROM effects',
      );
      expect([Number(ledger.n), Number(ledger.tasks)]).toEqual([count, count]);
      expect([Number(ledger.low), Number(ledger.high)]).toEqual([Math.min(...ids), Math.max(...ids)]);
      // A second run would have met the primary key and used another attempt: none did.
      const [attempts] = await db.query<any[]>(
        'SELECT MIN(attempts) AS least, MAX(attempts) AS most, COUNT(last_error) AS errors FROM punctual_tasks WHERE id IN (?)',
        [ids],
      );
      expect([Number(attempts.least), Number(attempts.most), Number(attempts.errors)]).toEqual([1, 1, 0]);
      console.log(
        `handler module: ${count} tasks, ${seenAtKill.length} kills -9 (effects at each kill: ${seenAtKill.join(', ')}), ${ledger.n} effects, each task once`,
      );
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 120_000);

  describe('with the server up', () => {
    let server: ServerProcess;
    let receiver: Server;
    let receiverUrl: string;
    const calls: { key: string; task: number; attempt: number }[] = [];

    beforeAll(async () => {
      receiver = createServer((request, response) => {
        const key = String(request.headers['idempotency-key']);
        const first = !calls.some((call) => call.key === key);
        calls.push({ key, task: Number(request.headers['x-task']), attempt: Number(request.headers['x-attempt']) });
        // The first call of each key fails: the retry must carry the same key.
        response.writeHead(first ? 503 : 200).end();
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      server = await startServer({ env: { DATABASE_URL: db.url, HANDLERS: modulePath, RETRY_BASE_MS: '100' } });
    });

    afterAll(async () => {
      await server?.stop();
      await new Promise((resolve) => receiver?.close(resolve));
    });

    it('runs an outside handler at least once with one idempotency key per task', async () => {
      const ids = await createTasks(
        server,
        Array.from({ length: 20 }, () => ({ type: 'notify_outside', payload: { url: receiverUrl }, delayMs: 0 })),
      );
      await waitFor(
        async () =>
          Number((await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'done' AND id IN (?)", [ids]))[0].n) === ids.length,
        20_000,
        'every outside task to be done',
      );
      const tasks = await db.query<any[]>('SELECT id, attempts, created_at FROM punctual_tasks WHERE id IN (?) ORDER BY id', [ids]);
      for (const task of tasks) {
        const mine = calls.filter((call) => call.task === Number(task.id));
        expect(mine.map((call) => call.attempt)).toEqual([1, 2]);
        expect(new Set(mine.map((call) => call.key)).size).toBe(1);
        expect(mine[0]!.key).toBe(`punctual-${task.id}-${new Date(task.created_at).getTime()}`);
        expect(Number(task.attempts)).toBe(2);
      }
      expect(new Set(calls.map((call) => call.key)).size).toBe(ids.length);
    });

    it('validates a create by the module’s schema: a 400 naming the field, nothing written', async () => {
      const before = await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks');
      const tooLong = await server.request('POST', '/tasks', { type: 'ledger_write', payload: { note: 'x'.repeat(33) }, delayMs: 0 });
      expect(tooLong.status).toBe(400);
      expect(tooLong.body.message).toContain('payload/note');
      const unknown = await server.request('POST', '/tasks', { type: 'ledger_write', payload: { note: 'a', extra: 1 }, delayMs: 0 });
      expect(unknown.status).toBe(400);
      const batch = await server.request('POST', '/tasks/batch', { tasks: [{ type: 'ledger_write', payload: {}, delayMs: 0 }] });
      expect(batch.body.results[0].status).toBe(400);
      expect(batch.body.results[0].message).toContain('note');
      expect(await db.query<any[]>('SELECT COUNT(*) AS n FROM punctual_tasks')).toEqual(before);
    });

    it('lists both types in /types, OpenAPI and /metrics', async () => {
      const types = await server.request('GET', '/types');
      expect(types.body.types.map((type: { type: string }) => type.type)).toEqual(
        expect.arrayContaining(['ledger_write', 'notify_outside', 'close_order', 'webhook']),
      );
      const document = (await server.request('GET', '/openapi.json')).body;
      const create = document.paths['/tasks'].post.requestBody.content['application/json'].schema;
      expect(create.discriminator.mapping).toMatchObject({
        ledger_write: '#/components/schemas/CreateTask.ledger_write',
        notify_outside: '#/components/schemas/CreateTask.notify_outside',
        close_order: '#/components/schemas/CreateTask.close_order',
      });
      expect(document.components.schemas['CreateTask.ledger_write'].properties.payload.properties.note).toEqual({
        type: 'string',
        minLength: 1,
        maxLength: 32,
      });
      const metrics = await fetch(`${server.baseUrl}/metrics`).then((answer) => answer.text());
      expect(metrics).toMatch(/punctual_task_runs_total\{[^}]*type="notify_outside"[^}]*\} \d+/);
    });
  });
});
