/**
 * The lists page by keyset as deep as the backlog goes (the console reaches its 20,000th pending
 * task), and the search finds a task by its id, key, key part and tag.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { seedBacklog } from '../helpers/backlog.js';
import { startTestService, type TestService } from '../helpers/service.js';

const TOKEN = 'list-keyset-admin-token-0123456789';
const COUNT = 20_000;
const DAY = 86_400_000;
const TYPES = ['close_order', 't2', 't3', 't4', 't5'];

let db: TestDatabase;
let service: TestService;
let start: number;

const get = async (url: string) => service.call('GET', url, undefined, { authorization: `Bearer ${TOKEN}` });

beforeAll(async () => {
  db = await createTestDatabase('list_keyset');
  service = await startTestService(db, { API_TOKEN: TOKEN, HORIZON_MS: '60000' });
  start = Date.now() + DAY;
  await seedBacklog((sql) => db.execute(sql), { count: COUNT, start, spreadMs: 3 * DAY, types: TYPES, merchants: 13 });
  // A few finished ones, for the keyset of a finished status.
  await db.execute("UPDATE punctual_tasks SET status = 'failed', finished_at = UTC_TIMESTAMP(3) - INTERVAL id SECOND WHERE id % 1000 = 7");
}, 120_000);

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('a list by keyset', () => {
  it('reaches the last pending task, past the deepest offset', async () => {
    const tooDeep = await get('/tasks?status=pending&offset=15000');
    expect(tooDeep.status).toBe(400);
    const last = await get('/tasks?status=pending&limit=50&last=true');
    expect(last.status).toBe(200);
    const { total, offset, tasks, nextCursor, prevCursor } = last.body;
    expect(total).toBe(COUNT - 20);
    expect(tasks).toHaveLength(50);
    expect(offset).toBe(total - 50);
    expect(nextCursor).toBeNull();
    expect(prevCursor).not.toBeNull();
    // The last of all by runAt, then id.
    const [row] = await db.query<any[]>("SELECT id FROM punctual_tasks WHERE status = 'pending' ORDER BY run_at DESC, id DESC LIMIT 1");
    expect(tasks[49].id).toBe(Number(row.id));
    // The page before it, and back again: the same page.
    const before = (await get(`/tasks?status=pending&limit=50&before=${prevCursor}`)).body;
    expect(before.offset).toBe(total - 100);
    expect(before.tasks[49].runAt <= tasks[0].runAt).toBe(true);
    const again = (await get(`/tasks?status=pending&limit=50&after=${before.nextCursor}`)).body;
    expect(again.tasks.map((t: any) => t.id)).toEqual(tasks.map((t: any) => t.id));
    expect(again.offset).toBe(offset);
  });

  it('jumps to a due time, with its place in the list', async () => {
    const at = new Date(start + 2 * DAY).toISOString();
    const page = (await get(`/tasks?status=pending&limit=20&at=${encodeURIComponent(at)}`)).body;
    const [{ n }] = await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE status = 'pending' AND run_at < ?", [
      new Date(at),
    ]);
    expect(page.offset).toBe(Number(n));
    expect(Date.parse(page.tasks[0].runAt)).toBeGreaterThanOrEqual(Date.parse(at));
    expect(page.prevCursor).not.toBeNull();
    expect(page.nextCursor).not.toBeNull();
  });

  it('pages a finished status newest first, with a type filter too', async () => {
    const first = (await get('/tasks?status=failed&limit=8')).body;
    expect(first.total).toBe(20);
    const second = (await get(`/tasks?status=failed&limit=8&after=${first.nextCursor}`)).body;
    const third = (await get(`/tasks?status=failed&limit=8&after=${second.nextCursor}`)).body;
    const ids = [...first.tasks, ...second.tasks, ...third.tasks].map((t: any) => t.id);
    const rows = await db.query<any[]>(
      "SELECT id FROM punctual_tasks WHERE status = 'failed' ORDER BY finished_at DESC, run_at DESC, id DESC",
    );
    expect(ids).toEqual(rows.map((r) => Number(r.id)));
    expect(third.nextCursor).toBeNull();
    expect(third.offset).toBe(16);
    const typed = (await get('/tasks?status=pending&type=t3&limit=10&last=true')).body;
    expect(typed.tasks.every((t: any) => t.type === 't3')).toBe(true);
    expect(typed.offset).toBe(typed.total - 10);
  });

  it('refuses a cursor of another status and two ways at once, clearly', async () => {
    const pending = (await get('/tasks?status=pending&limit=5')).body;
    const wrong = await get(`/tasks?status=failed&after=${pending.nextCursor}`);
    expect(wrong.status).toBe(400);
    expect(wrong.body.message).toMatch(/querystring\/after is not a cursor of a page of this status/);
    const two = await get(`/tasks?status=pending&offset=50&last=true`);
    expect(two.status).toBe(400);
  });
});

describe('the search', () => {
  it('finds a task by its key part, its key, its id, and the tasks of a tag', async () => {
    const byPart = (await get('/tasks/search?q=SN104500')).body;
    expect(byPart.tasks.map((t: any) => t.key)).toEqual(['close_order:SN104500']);
    const byKey = (await get('/tasks/search?q=close_order:SN104500')).body;
    expect(byKey.tasks[0].key).toBe('close_order:SN104500');
    const byId = (await get(`/tasks/search?q=${byKey.tasks[0].id}`)).body;
    expect(byId.tasks.map((t: any) => t.id)).toContain(byKey.tasks[0].id);
    const tagged = (await get('/tasks/search?q=merchant:7&limit=20')).body;
    const [{ n }] = await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_task_tags WHERE tag = 'merchant:7'");
    expect(tagged.tagged).toBe(Number(n));
    expect(tagged.tasks).toHaveLength(20);
    expect(tagged.tasks.every((t: any) => t.tags.includes('merchant:7'))).toBe(true);
    const nothing = (await get('/tasks/search?q=SN999999999')).body;
    expect(nothing).toEqual({ tasks: [], tagged: 0 });
    expect((await get('/tasks/search?q=%20')).status).toBe(400);
  });
});
