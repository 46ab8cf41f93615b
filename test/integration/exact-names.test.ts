/**
 * Keys, tags and type names are exact: they differ when a letter's case or a trailing space
 * differs, in the tag check, the store, the lookups by key and tag and the bulk changes (binary
 * NO PAD collations). And the intake's group commit fails only the create that the database
 * refuses: the others in its group still get 201, and no task row commits without its tag rows.
 * Against a real server (the service listening on a port, real MariaDB), over HTTP.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testHandler } from '../helpers/handlers.js';
import { startTestService, type TestService } from '../helpers/service.js';

let db: TestDatabase;
let service: TestService;
let baseUrl: string;

const RUN_AT = '2027-06-01T10:00:00+08:00';
const order = (sn: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  type: 'close_order',
  payload: { orderSn: sn },
  runAt: RUN_AT,
  ...extra,
});

async function post(path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}

async function get(path: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}${path}`);
  return { status: response.status, body: await response.json() };
}

async function count(sql: string, values: unknown[] = []): Promise<number> {
  return Number((await db.query<any[]>(sql, values))[0].n);
}

const tagRows = (id: number) => count('SELECT COUNT(*) AS n FROM punctual_task_tags WHERE task_id = ?', [id]);
const pendingIds = async (query: string) =>
  ((await get(`/tasks/pending?${query}`)).body.tasks as { id: number }[]).map((task) => task.id).sort((a, b) => a - b);

beforeAll(async () => {
  db = await createTestDatabase('exact_names');
  // A second type that differs from the built-in `webhook` by case alone.
  service = await startTestService(db, { PORT: '0' }, { boot: false, handlers: [testHandler('Webhook', async () => undefined)] });
  baseUrl = await service.start();
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await db.execute('DELETE FROM punctual_tasks');
});

describe('tags that differ only in case', () => {
  it('are two tags: 201 with both kept, found exactly by each, with a key too', async () => {
    const plain = await post('/tasks', order('T1', { tags: ['sale', 'SALE'] }));
    expect(plain.status).toBe(201);
    expect(plain.body.tags).toEqual(['sale', 'SALE']);
    const keyed = await post('/tasks', order('T2', { key: 'close_order:T2', tags: ['sale', 'SALE'] }));
    expect(keyed.status).toBe(201);
    const lower = await post('/tasks', order('T3', { tags: ['sale'] }));
    const upper = await post('/tasks', order('T4', { tags: ['SALE'] }));
    for (const answer of [plain, keyed, lower, upper]) expect(answer.status).toBe(201);
    expect(await tagRows(plain.body.id)).toBe(2);
    expect(await tagRows(keyed.body.id)).toBe(2);
    const both = [plain.body.id, keyed.body.id];
    expect(await pendingIds('tag=sale')).toEqual([...both, lower.body.id].sort((a, b) => a - b));
    expect(await pendingIds('tag=SALE')).toEqual([...both, upper.body.id].sort((a, b) => a - b));
    // Bulk by tag picks exactly too: cancelling SALE leaves the task tagged only `sale` pending.
    const bulk = await post('/tasks/bulk/cancel', { tag: 'SALE' });
    expect(bulk.status).toBe(200);
    expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'cancelled'")).toBe(3);
    expect(await pendingIds('tag=sale')).toEqual([lower.body.id]);
  });

  it('in a repeat of a keyed create answers 200 with the same task, not a second one', async () => {
    const first = await post('/tasks', order('R1', { key: 'close_order:R1', tags: ['sale', 'SALE'] }));
    const again = await post('/tasks', order('R1', { key: 'close_order:R1', tags: ['sale', 'SALE'] }));
    expect([first.status, again.status]).toEqual([201, 200]);
    expect(again.body.id).toBe(first.body.id);
  });

  it('sent at once with 40 valid creates of other clients: 120 x 201, each task with its tag rows', async () => {
    const valid = Array.from({ length: 40 }, (_, i) => order(`V${i}`, { key: `close_order:V${i}`, tags: [`merchant:${i}`] }));
    const mixed = Array.from({ length: 80 }, (_, i) =>
      order(`M${i}`, { ...(i % 2 === 0 ? { key: `close_order:M${i}` } : {}), tags: ['sale', 'SALE'] }),
    );
    const all = valid.flatMap((body, i) => [body, mixed[2 * i]!, mixed[2 * i + 1]!]);
    const answers = await Promise.all(all.map((body) => post('/tasks', body)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(120);
    for (const [i, answer] of answers.entries()) {
      expect(await tagRows(answer.body.id)).toBe((all[i]!.tags as string[]).length);
    }
  });

  it('in a batch answers per item: 201 each, never a 500', async () => {
    const batch = await post('/tasks/batch', {
      tasks: [order('B1', { tags: ['sale', 'SALE'] }), order('B2', { key: 'close_order:B2', tags: ['sale', 'SALE'] }), order('B3')],
    });
    expect(batch.status).toBe(200);
    expect(batch.body.results.map((result: { status: number }) => result.status)).toEqual([201, 201, 201]);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_task_tags')).toBe(4);
  });

  it('repeated exactly within one task are refused with a 400 that writes nothing', async () => {
    const answer = await post('/tasks', order('D1', { tags: ['sale', 'sale'] }));
    expect(answer.status).toBe(400);
    expect(answer.body.message).toMatch(/repeat/);
    expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks')).toBe(0);
  });
});

describe('keys that differ only in trailing spaces', () => {
  it('are two keys: both created, a cancel by one leaves the other pending', async () => {
    const bare = await post('/tasks', order('P1', { key: 'pad:1' }));
    const padded = await post('/tasks', order('P1', { key: 'pad:1 ' }));
    expect([bare.status, padded.status]).toEqual([201, 201]);
    expect(padded.body.id).not.toBe(bare.body.id);
    expect(padded.body.key).toBe('pad:1 ');
    const cancel = await post('/tasks/by-key/pad:1%20/cancel');
    expect(cancel.status).toBe(200);
    expect(cancel.body.id).toBe(padded.body.id);
    expect((await get('/tasks/by-key/pad:1')).body.status).toBe('pending');
    expect((await get('/tasks/by-key/pad:1%20')).body.status).toBe('cancelled');
    // Case too: PAD:1 is not pad:1.
    expect((await get('/tasks/by-key/PAD:1')).status).toBe(404);
  });
});

describe('type names that differ only in case', () => {
  it('keep a setting each: pausing Webhook does not pause webhook', async () => {
    expect((await post('/types/Webhook/pause')).status).toBe(200);
    const limits = await fetch(`${baseUrl}/types/webhook/limits`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ maxConcurrency: 3 }),
    });
    expect(limits.status).toBe(200);
    const rows = await db.query<any[]>('SELECT type, paused, max_concurrency FROM punctual_type_controls ORDER BY type');
    expect(rows.map((row) => [row.type, Number(row.paused), row.max_concurrency])).toEqual([
      ['Webhook', 1, null],
      ['webhook', 0, 3],
    ]);
    const types = new Map(((await get('/types')).body.types as { type: string; paused: boolean }[]).map((t) => [t.type, t.paused]));
    expect(types.get('Webhook')).toBe(true);
    expect(types.get('webhook')).toBe(false);
  });
});

describe('a create the database refuses inside a group commit', () => {
  it('fails alone: the others of its group get 201, and it leaves no task row without its tags', async () => {
    // Two faults only this test's database has: a tag the table refuses as a duplicate entry
    // (what a collation gap did), and one it refuses with another error.
    await db.execute(`CREATE TRIGGER refuse_tags BEFORE INSERT ON punctual_task_tags FOR EACH ROW BEGIN
      IF NEW.tag = 'dup' THEN SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, MESSAGE_TEXT = 'Duplicate entry for key task_tags_pk'; END IF;
      IF NEW.tag = 'broken' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by a trigger'; END IF;
    END`);
    try {
      const valid = Array.from({ length: 40 }, (_, i) => order(`G${i}`, { key: `close_order:G${i}`, tags: [`merchant:${i}`] }));
      const bad = [
        order('X1', { key: 'close_order:X1', tags: ['dup'] }),
        order('X2', { tags: ['dup'] }),
        order('X3', { key: 'close_order:X3', tags: ['broken'] }),
        order('X4', { tags: ['broken'] }),
      ];
      const all = [...valid.slice(0, 20), ...bad, ...valid.slice(20)];
      const answers = await Promise.all(all.map((body) => post('/tasks', body)));
      const validAnswers = answers.filter((_, i) => !bad.includes(all[i]!));
      expect(validAnswers.map((answer) => answer.status)).toEqual(valid.map(() => 201));
      for (const answer of validAnswers) expect(await tagRows(answer.body.id)).toBe(1);
      const badAnswers = answers.filter((_, i) => bad.includes(all[i]!));
      for (const answer of badAnswers) expect(answer.status).toBe(500);
      expect(await count("SELECT COUNT(*) AS n FROM punctual_tasks WHERE JSON_CONTAINS(payload, '\"X1\"', '$.orderSn') OR task_key LIKE 'close_order:X%'")).toBe(0);
      expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks t WHERE NOT EXISTS (SELECT 1 FROM punctual_task_tags g WHERE g.task_id = t.id)')).toBe(0);
      expect(await count('SELECT COUNT(*) AS n FROM punctual_tasks')).toBe(40);
    } finally {
      await db.execute('DROP TRIGGER refuse_tags');
    }
  });
});
