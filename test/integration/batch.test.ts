import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PunctualClient } from '../../clients/ts/src/client.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'batch-admin-token-0123456789';
const WRITE = 'batch-write-token-0123456789';
const READ = 'batch-read-token-01234567890';
const as = (token: string) => ({ authorization: `Bearer ${token}` });

let db: TestDatabase;
let service: TestService;
let baseUrl: string;

const order = (sn: string, extra: Record<string, unknown> = {}) => ({
  type: 'close_order',
  payload: { orderSn: sn },
  runAt: '2027-06-01T10:00:00+08:00',
  key: `close_order:${sn}`,
  ...extra,
});

async function count(sql = 'SELECT COUNT(*) AS n FROM punctual_tasks'): Promise<number> {
  return Number((await db.query<any[]>(sql))[0].n);
}

beforeAll(async () => {
  db = await createTestDatabase('batch');
  service = await startTestService(db, { API_TOKEN: TOKEN, API_TOKENS_WRITE: WRITE, API_TOKENS_READ: READ, PORT: '0' }, { boot: false });
  baseUrl = await service.start();
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
});

describe('POST /tasks/batch', () => {
  it('answers each item as POST /tasks would, in order, and writes only the valid ones', async () => {
    const existing = await service.call('POST', '/tasks', order('SN-OLD'), as(WRITE));
    expect(existing.status).toBe(201);
    const conflicting = await service.call('POST', '/tasks', order('SN-TAKEN'), as(WRITE));
    const items = [
      order('SN1', { tags: ['merchant:42', 'sale:88'] }),
      { type: 'close_order', payload: { orderSn: 'SN2' } }, // neither runAt nor delayMs
      order('SN-OLD'), // same key, same content: 200
      { ...order('SN-TAKEN'), payload: { orderSn: 'OTHER' } }, // same key, other content: 409
      order('SN3', { runAt: 'tomorrow-ish' }),
      order('SN4', { tags: ['no spaces allowed'] }),
      { type: 'nope', payload: {}, delayMs: 1000 },
      order('SN5', { extra: true }),
      order('SN6'),
      order('SN6'), // the same key twice in one batch: the second is a repeat of the first
      'not an object',
    ];
    const single = await Promise.all(
      [items[1], items[4], items[5], items[6], items[7]].map((item) => service.call('POST', '/tasks', item, as(WRITE))),
    );
    const { status, body } = await service.call('POST', '/tasks/batch', { tasks: items }, as(WRITE));
    expect(status).toBe(200);
    expect(body.results.map((r: { status: number }) => r.status)).toEqual([201, 400, 200, 409, 400, 400, 400, 400, 201, 200, 400]);
    // A bad item's message is what POST /tasks says about it alone.
    expect([1, 4, 5, 6, 7].map((i) => body.results[i].message)).toEqual(single.map((answer) => answer.body.message));
    expect(body.results[0]).toMatchObject({ key: 'close_order:SN1', id: expect.any(Number) });
    expect(body.results[2].id).toBe(existing.body.id);
    expect(body.results[3]).toMatchObject({ code: 'PUNCTUAL_CONFLICT', id: conflicting.body.id });
    expect(body.results[9].id).toBe(body.results[8].id);
    expect(body.results[10].message).toBe('body must be object');
    expect(body).toMatchObject({ created: 2, repeated: 2, refused: 7 });
    // 2 before + 2 created; nothing of the bad items, the tags with their task.
    expect(await count()).toBe(4);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_task_tags WHERE tag = 'merchant:42'")).toBe(1);
    expect((await service.call('GET', `/tasks/${body.results[0].id}`, undefined, as(READ))).body.tags).toEqual(['merchant:42', 'sale:88']);
  });

  it('writes 1,000 items and refuses 1,001 as a whole, changing nothing', async () => {
    const tasks = Array.from({ length: 1000 }, (_, i) => order(`BULK${i}`, { tags: [`merchant:${i % 7}`] }));
    const { status, body } = await service.call('POST', '/tasks/batch', { tasks }, as(WRITE));
    expect(status).toBe(200);
    expect(body.created).toBe(1000);
    expect(new Set(body.results.map((r: { id: number }) => r.id)).size).toBe(1000);
    expect(body.results.map((r: { key: string }) => r.key)).toEqual(tasks.map((task) => task.key));
    expect(await count()).toBe(1000);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_task_tags')).toBe(1000);
    // The same batch again: all 200, nothing new.
    const again = await service.call('POST', '/tasks/batch', { tasks }, as(WRITE));
    expect(again.body).toMatchObject({ created: 0, repeated: 1000, refused: 0 });
    const tooMany = await service.call('POST', '/tasks/batch', { tasks: [...tasks, order('ONE-MORE')] }, as(WRITE));
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.message).toMatch(/body\/tasks must NOT have more than 1000 items|body\/tasks/);
    expect(await count()).toBe(1000);
  });

  it("stores each item's instants to the millisecond: runAt, the instant asked for, created and updated", async () => {
    const before = Date.now();
    const runAts = ['2027-06-01T10:00:00.123+08:00', '2027-06-01T02:00:00.999Z', Date.UTC(2031, 11, 31, 23, 59, 59, 1)];
    const { body } = await service.call('POST', '/tasks/batch', { tasks: runAts.map((runAt, i) => order(`MS${i}`, { runAt })) }, as(WRITE));
    const after = Date.now();
    expect(body.created).toBe(3);
    const rows = await db.query<any[]>(
      `SELECT id, ${['run_at', 'requested_run_at', 'created_at', 'updated_at'].map((c) => `TIMESTAMPDIFF(MICROSECOND, '1970-01-01', ${c}) DIV 1000 AS ${c}`).join(', ')}
       FROM punctual_tasks ORDER BY id`,
    );
    expect(rows.map((row) => [Number(row.run_at), Number(row.requested_run_at)])).toEqual(
      runAts.map((runAt) => [new Date(runAt).getTime(), new Date(runAt).getTime()]),
    );
    // One create instant for the whole batch, within the request.
    const created = new Set(rows.flatMap((row) => [Number(row.created_at), Number(row.updated_at)]));
    expect(created.size).toBe(1);
    expect([...created][0]).toBeGreaterThanOrEqual(before);
    expect([...created][0]).toBeLessThanOrEqual(after);
    const task = (await service.call('GET', `/tasks/${body.results[0].id}`, undefined, as(READ))).body;
    expect(task.runAt).toBe('2027-06-01T02:00:00.123Z');
  });

  it('stores the strings a shop sends as sent: quotes, backslashes, NUL, emoji, SQL', async () => {
    // The intake writes its INSERTs as text, each value escaped by mysql2: a batch goes through
    // the multi-row INSERT, a lone create through the one-row INSERT.
    const strings = [
      `it's`,
      'say "hi"',
      'C:\\dir\\',
      'a\u0000b',
      '🎉 €',
      "x'); DROP TABLE punctual_tasks; --",
      "\\'",
      '?',
      '\n\r\t\b\u001a',
    ];
    const { body } = await service.call('POST', '/tasks/batch', { tasks: strings.map((sn) => order(sn)) }, as(WRITE));
    expect(body.created).toBe(strings.length);
    const loneSn = strings.join('').slice(0, 64);
    const lone = await service.call('POST', '/tasks', order(loneSn), as(WRITE));
    expect(lone.status).toBe(201);
    const ids: number[] = [...body.results.map((r: { id: number }) => r.id), lone.body.id];
    const sent = [...strings, loneSn];
    for (const [i, id] of ids.entries()) {
      const task = (await service.call('GET', `/tasks/${id}`, undefined, as(READ))).body;
      expect(task.payload).toEqual({ orderSn: sent[i] });
      expect(task.key).toBe(`close_order:${sent[i]}`);
    }
    const rows = await db.query<any[]>('SELECT task_key, JSON_VALUE(payload, "$.orderSn") AS sn FROM punctual_tasks ORDER BY id');
    expect(rows.map((row) => [row.task_key, row.sn])).toEqual(sent.map((sn) => [`close_order:${sn}`, sn]));
  });

  it('needs the write role', async () => {
    const answer = await service.call('POST', '/tasks/batch', { tasks: [order('SN-R')] }, as(READ));
    expect(answer.status).toBe(403);
    expect(await count()).toBe(0);
  });

  it('the typed client creates many', async () => {
    const client = new PunctualClient({ baseUrl, token: WRITE });
    const answer = await client.createMany([order('C1'), order('C2', { runAt: 'bad' }), order('C1')]);
    expect(answer.results.map((r) => r.status)).toEqual([201, 400, 200]);
    expect(answer.results[0]!.key).toBe('close_order:C1');
    expect((await client.get(answer.results[0]!.id!)).status).toBe('pending');
    expect(answer.created).toBe(1);
  });
});
