/**
 * Handler definitions as plain objects, in the service in-process: checked at start, validated on
 * create, run in the completion transaction, a `permanent: true` error failing the task at once;
 * a module's worker type validated on create and leased to a pull worker, never run here.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/server.js';

let db: TestDatabase;
let service: TestService;

const handlers = [
  {
    type: 'ledger_note',
    effect: 'database',
    payload: { type: 'object', properties: { note: { type: 'string', maxLength: 4 } }, required: ['note'], additionalProperties: false },
    async run({ tx, payload, task }: any) {
      if (payload.note === 'bad') throw Object.assign(new Error('a bad note, for good'), { permanent: true });
      await tx.query('INSERT INTO notes (task_id, note) VALUES (?, ?)', [task.id, payload.note]);
      if (payload.note === 'oops') throw new Error('after the write');
      return 'noted';
    },
  },
  {
    type: 'reset_membership',
    effect: 'worker',
    payload: { type: 'object', properties: { memberId: { type: 'integer' } }, required: ['memberId'], additionalProperties: false },
  },
];

beforeAll(async () => {
  db = await createTestDatabase('handler_defs');
  await db.execute('CREATE TABLE notes (task_id BIGINT PRIMARY KEY, note VARCHAR(8) NOT NULL)');
  service = await startTestService(db, {}, { definitions: handlers });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

const task = async (id: number) => (await service.call('GET', `/tasks/${id}`)).body;

describe('handler definitions', () => {
  it('refuses a payload its schema refuses, naming the field', async () => {
    const answer = await service.call('POST', '/tasks', { type: 'ledger_note', payload: { note: 'too long' }, delayMs: 0 });
    expect(answer.status).toBe(400);
    expect(answer.body.message).toContain('payload/note');
  });

  it('puts its payload schema in a valid OpenAPI document, in the union by type', async () => {
    const document = (await service.app.inject({ url: '/openapi.json' })).json();
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors ?? []).toEqual([]);
    const create = document.paths['/tasks'].post.requestBody.content['application/json'].schema;
    expect(create.discriminator.propertyName).toBe('type');
    expect(Object.keys(create.discriminator.mapping).sort()).toEqual(['close_order', 'ledger_note', 'reset_membership', 'webhook']);
    // The type field says the shop's own types too, not only the built-in two.
    expect(create.properties.type.description).toMatch(/ledger_note/);
    expect(create.properties.type.description).toMatch(/reset_membership/);
    expect(create.oneOf).toContainEqual({ $ref: '#/components/schemas/CreateTask.ledger_note' });
    expect(document.components.schemas['CreateTask.ledger_note'].properties).toEqual({
      type: { const: 'ledger_note' },
      payload: handlers[0]!.payload,
    });
  });

  it('writes in the completion transaction; a throw after the write leaves nothing', async () => {
    const good = await service.call('POST', '/tasks', { type: 'ledger_note', payload: { note: 'ok' }, delayMs: 0 });
    const oops = await service.call('POST', '/tasks', { type: 'ledger_note', payload: { note: 'oops' }, delayMs: 0, maxAttempts: 1 });
    const bad = await service.call('POST', '/tasks', { type: 'ledger_note', payload: { note: 'bad' }, delayMs: 0 });
    await waitFor(async () => (await task(good.body.id)).status === 'done' && (await task(oops.body.id)).status === 'failed', 10_000);
    const failed = await waitFor(async () => {
      const t = await task(bad.body.id);
      return t.status === 'failed' ? t : undefined;
    }, 10_000);
    // permanent: true fails at once, without retries.
    expect([failed.attempts, failed.lastError]).toEqual([1, 'a bad note, for good']);
    expect(await db.query<any[]>('SELECT task_id, note FROM notes ORDER BY task_id')).toEqual([{ task_id: good.body.id, note: 'ok' }]);
  });

  it("checks a module's worker type on create, lists it, and leases it to a pull worker only", async () => {
    const refused = await service.call('POST', '/tasks', { type: 'reset_membership', payload: { memberId: 'seven' }, delayMs: 0 });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain('payload/memberId');
    const created = await service.call('POST', '/tasks', { type: 'reset_membership', payload: { memberId: 7 }, delayMs: 0 });
    expect(created.status).toBe(201);
    const types = (await service.call('GET', '/types')).body;
    expect(JSON.stringify(types)).toContain('reset_membership');
    const lease = await service.call('POST', '/workers/lease', { types: ['reset_membership'], max: 5, leaseMs: 5_000, waitMs: 5_000 });
    expect(lease.status).toBe(200);
    expect(lease.body.tasks.map((t: any) => [t.id, t.payload])).toEqual([[created.body.id, { memberId: 7 }]]);
    // Not run by punctual: it stays leased to the worker until the worker settles it.
    expect((await task(created.body.id)).status).toBe('running');
    const ack = await service.call('POST', `/tasks/${created.body.id}/ack`, { leaseToken: lease.body.tasks[0].leaseToken });
    expect(ack.status).toBe(200);
    expect((await task(created.body.id)).status).toBe('done');
  });
});
