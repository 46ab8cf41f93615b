/**
 * A rolling deploy from the previous release (releases.json, built from its commit by
 * helpers/release.ts) to this tree, on one database: two processes of the old release migrate a
 * fresh database and take creates; two of this tree start beside them and migrate it (0020: the
 * old tables stay, `punctual_*` views over them) while the old ones keep creating and running;
 * then the old ones are stopped one by one with SIGTERM. Creates go on through whichever
 * processes run, the whole time. Every task closes an order (close_order), and a trigger on the
 * tasks' base table writes a ledger row per committed completion: each task ran exactly once,
 * none before its runAt, none lost, and every process stopped cleanly with no error logged.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { builtRelease, releases } from '../helpers/release.js';
import { createTask, errorsLogged, killLeftoverServers, startServer, waitFor, type ServerProcess } from '../helpers/server.js';
import { makeOrders, insertOrders } from '../helpers/shop.js';

vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

const previous = releases()[0]!;
let oldMain: string;
let db: TestDatabase;
const orders = makeOrders(4000, 20, 'RU');
/** Each task is due this long (give or take half of it) after its create. */
const DUE_AFTER_MS = 1500;

beforeAll(() => {
  oldMain = builtRelease(previous);
});

afterAll(async () => {
  killLeftoverServers();
  await db?.drop();
});

interface Fleet {
  name: string;
  server: ServerProcess;
}

describe(`a rolling upgrade from ${previous.version}`, () => {
  it('runs every task exactly once, none early, none lost, while the old and the new release share the database', async () => {
    db = await createTestDatabase('rolling', { create: false });
    const env = { DATABASE_URL: db.url, CONCURRENCY: '4' };
    const started = Date.now();
    const old = await Promise.all([1, 2].map(async (n) => ({ name: `old-${n}`, server: await startServer({ env, main: oldMain }) })));
    // The shop's tables, and the ledger: a row per committed completion, on the tasks' base table
    // (the previous release's `tasks`; a trigger cannot be on a view).
    const [[base]] = await db.pool.query<mysql.RowDataPacket[]>(
      "SELECT table_name AS name FROM information_schema.TABLES WHERE table_schema = ? AND table_name IN ('tasks', 'punctual_tasks') AND table_type = 'BASE TABLE'",
      [db.name],
    );
    const tasksTable = String(base?.name ?? base?.NAME);
    await db.execute('CREATE TABLE goods (id BIGINT UNSIGNED PRIMARY KEY, stock INT NOT NULL)');
    await db.execute(`CREATE TABLE orders (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL UNIQUE,
      status VARCHAR(16) NOT NULL DEFAULT 'unpaid', items JSON NOT NULL, closed_at DATETIME(3) NULL)`);
    await db.execute('CREATE TABLE close_runs (id BIGINT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT UNSIGNED NOT NULL, KEY (task_id))');
    await db.execute(`CREATE TRIGGER rolling_close_runs AFTER UPDATE ON \`${tasksTable}\` FOR EACH ROW
      INSERT INTO close_runs (task_id) SELECT NEW.id FROM DUAL WHERE NEW.status = 'done' AND OLD.status <> 'done' AND NEW.type = 'close_order'`);
    await db.execute('INSERT INTO goods (id, stock) VALUES ?', [Array.from({ length: 20 }, (_, i) => [i + 1, 1000])]);
    await insertOrders(db, orders);

    // Creates through the processes that run, in turn, until told to stop.
    const live: Fleet[] = [...old];
    const ids: number[] = [];
    const through = new Map<string, number>();
    let creating = true;
    let nextOrder = 0;
    const creator = async () => {
      for (let turn = 0; creating && nextOrder < orders.length; turn++) {
        const order = orders[nextOrder++]!;
        const at = live[turn % live.length]!;
        const runAt = Date.now() + DUE_AFTER_MS / 2 + Math.floor(Math.random() * DUE_AFTER_MS);
        const answer = await createTask(at.server, { type: 'close_order', payload: { orderSn: order.orderSn }, runAt, key: order.orderSn });
        if (answer.status !== 201)
          throw new Error(
            `${at.name}: POST /tasks answered ${answer.status}: ${JSON.stringify(answer.body)}${await errorsLogged(at.server)}`,
          );
        ids.push(answer.body.id);
        through.set(at.name, (through.get(at.name) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    // A failed create fails the test at the end, not as an unhandled rejection in the middle.
    const creators = Promise.all(Array.from({ length: 4 }, creator)).then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    );
    const createdAtLeast = async (n: number, what: string) => {
      const failure = await Promise.race([waitFor(async () => ids.length >= n, 60_000, what).then(() => undefined), creators]);
      if (failure !== undefined) throw failure;
    };
    const fresh: Fleet[] = [];
    const exits: (number | null)[] = [];
    let views: mysql.RowDataPacket[];
    try {
      await createdAtLeast(200, 'creates through the old release');
      // The new release starts beside the old one and migrates the database under it.
      fresh.push(...(await Promise.all([1, 2].map(async (n) => ({ name: `new-${n}`, server: await startServer({ env }) })))));
      live.push(...fresh);
      views = await db.query<mysql.RowDataPacket[]>(
        "SELECT table_name AS name FROM information_schema.VIEWS WHERE table_schema = ? AND table_name LIKE 'punctual\\_%' ORDER BY 1",
        [db.name],
      );
      await createdAtLeast(ids.length + 300, 'creates through all four');
      // The reads that name an index (a type's list, the charts, the types' due counts), through
      // every process: the old ones on their own tables, the new ones through the views.
      for (const { name, server } of live) {
        for (const path of ['/tasks/pending?type=close_order&limit=5', '/charts/upcoming', '/types', '/metrics']) {
          const response = await fetch(`${server.baseUrl}${path}`);
          expect(`${name} ${path} ${response.status}`).toBe(`${name} ${path} 200`);
          await response.arrayBuffer();
        }
      }
      for (const stopping of old) {
        live.splice(live.indexOf(stopping), 1);
        exits.push(await stopping.server.stop('SIGTERM'));
        await createdAtLeast(ids.length + 200, `creates after ${stopping.name} stopped`);
      }
    } finally {
      creating = false;
    }
    const failure = await creators;
    if (failure !== undefined) throw failure;

    const done = async () => {
      const [[row]] = await db.pool.query<mysql.RowDataPacket[]>(
        `SELECT COUNT(*) AS n FROM \`${tasksTable}\` WHERE status = 'done' AND id IN (?)`,
        [ids],
      );
      return Number(row?.n) === ids.length;
    };
    await waitFor(done, 60_000, 'every task to run');
    const [[ledger]] = await db.pool.query<mysql.RowDataPacket[]>(
      `SELECT COUNT(*) AS runs, COUNT(DISTINCT task_id) AS tasks,
              (SELECT COUNT(*) FROM orders WHERE status = 'closed') AS closed,
              (SELECT COUNT(*) FROM \`${tasksTable}\` t JOIN orders o ON o.order_sn = t.task_key WHERE t.id IN (?) AND o.closed_at < t.run_at) AS early
         FROM close_runs WHERE task_id IN (?)`,
      [ids, ids],
    );
    // Each successful run on record once: a row where 0.1.0 ran it, its task's row (done_by) where this tree did.
    const runsBy = await db.query<mysql.RowDataPacket[]>(
      `SELECT process, COUNT(*) AS n FROM (
          SELECT process FROM \`${tasksTable === 'tasks' ? 'task_runs' : 'punctual_task_runs'}\` WHERE task_id IN (?) AND outcome = 'done'
          UNION ALL SELECT done_by FROM \`${tasksTable}\` WHERE id IN (?) AND done_by IS NOT NULL
        ) AS runs GROUP BY process`,
      [ids, ids],
    );
    for (const { server } of fresh) exits.push(await server.stop('SIGTERM'));
    const figures = {
      created: ids.length,
      ranOnce: Number(ledger?.tasks),
      runs: Number(ledger?.runs),
      closed: Number(ledger?.closed),
      early: Number(ledger?.early),
      through: Object.fromEntries(through),
      ranBy: runsBy.map((row) => Number(row.n)),
      onRecord: runsBy.reduce((sum, row) => sum + Number(row.n), 0),
      tookMs: Date.now() - started,
    };
    console.log(`rolling upgrade ${previous.version} → this tree: ${JSON.stringify(figures)}`);
    expect(views.map((row) => String(row.name ?? row.NAME))).toContain('punctual_tasks');
    expect(figures).toMatchObject({ ranOnce: ids.length, runs: ids.length, closed: ids.length, early: 0, onRecord: ids.length });
    expect(new Set(ids).size).toBe(ids.length);
    for (const name of ['old-1', 'old-2', 'new-1', 'new-2']) expect(through.get(name)).toBeGreaterThan(0);
    expect(exits).toEqual([0, 0, 0, 0]);
    const errors = [...old, ...fresh].flatMap(({ name, server }) =>
      server.logs.filter((line) => line.level >= 50).map((line) => ({ name, ...line })),
    );
    expect(errors).toEqual([]);
  });
});
