/**
 * What GET /events reads (store/events.ts) against MariaDB: only what finished by the horizon it is
 * given, so a run whose finish was stamped before a later one's but that commits after it is still
 * sent; the run rows as a prefix in id order (one past the horizon holds back those after it, and
 * a position never goes back, so a row committed out of time order is sent once); the
 * successful runs, on record in their tasks' rows, in the (finished_at, run_at, id) order of their
 * positions, each once; and the rows and the tasks' runs merged in time order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/connection.js';
import { EventStore, START, type EventPosition, type TaskEvent } from '../../src/store/events.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let database: Database;
let store: EventStore;

const BASE = Date.parse('2026-06-01T00:00:00Z');
const at = (ms: number) => new Date(BASE + ms);

beforeAll(async () => {
  db = await createTestDatabase('events_horizon');
  database = new Database({ url: db.url, poolSize: 2, lockWaitTimeoutS: 5 });
  store = new EventStore(database);
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

/** A task done at `finished` ms after BASE, by a process of this release (done_by), due at `due`. */
async function doneTask(finished: number, due = finished - 10): Promise<number> {
  const result = await db.execute(
    "INSERT INTO punctual_tasks (type, payload, run_at, status, attempts, finished_at, lateness_ms, done_by) VALUES ('t', '{}', ?, 'done', 1, ?, 1, 'p:1:a')",
    [at(due), at(finished)],
  );
  return result.insertId;
}

/** A failed run's row of task `task`, finished at `finished` ms after BASE. */
async function runRow(task: number, finished: number): Promise<number> {
  const result = await db.execute(
    `INSERT INTO punctual_task_runs (task_id, attempt, outcome, due_at, started_at, finished_at, lateness_ms, duration_ms, error, process)
     VALUES (?, 1, 'retry', ?, ?, ?, 0, 1, 'x', 'p:1:a')`,
    [task, at(finished), at(finished), at(finished)],
  );
  return result.insertId;
}

/** Reads on from `from` as the route does, until nothing more comes by `horizon`; the events and where it ends. */
async function readAll(from: EventPosition, horizon: number, limit = 500): Promise<{ events: TaskEvent[]; position: EventPosition }> {
  const events: TaskEvent[] = [];
  let position = from;
  for (let reads = 0; ; reads++) {
    if (reads > 100) throw new Error(`still reading after 100 pages at ${JSON.stringify(position)}`);
    const page = await store.after(position, limit, BASE + horizon);
    if (page.length === 0) return { events, position };
    for (const event of page) {
      events.push(event);
      if (event.kind === 'change') position = { ...position, changes: event.id };
      else if (event.id !== null) position = { ...position, runs: event.id };
      else position = { ...position, done: event.place! };
    }
  }
}

describe('the event store', () => {
  it('sends a run stamped earlier but committed later, as long as it is within the horizon', async () => {
    await db.execute('DELETE FROM punctual_tasks');
    const first = await doneTask(1000);
    const later = await doneTask(2000);
    // Read up to 1,500: the task done at 2,000 is past the horizon and waits.
    const early = await readAll({ runs: 0, changes: 0, done: START }, 1500);
    expect(early.events.map((event) => event.kind === 'run' && event.taskId)).toEqual([first]);
    // A run finished at 1,800 commits only now (its transaction was slow): it is still ahead.
    const slow = await doneTask(1800);
    const rest = await readAll(early.position, 5000);
    expect(rest.events.map((event) => event.kind === 'run' && event.taskId)).toEqual([slow, later]);
    expect(rest.events.every((event) => event.kind === 'run' && event.id === null && event.outcome === 'done')).toBe(true);
    // Nothing twice.
    expect((await readAll(rest.position, 5000)).events).toEqual([]);
  });

  it('orders tasks done at one instant by run_at and id, each once across pages of one', async () => {
    await db.execute('DELETE FROM punctual_tasks');
    const ids = [await doneTask(3000, 100), await doneTask(3000, 50), await doneTask(3000, 50), await doneTask(2999, 900)];
    const { events } = await readAll({ runs: 0, changes: 0, done: START }, 10_000, 1);
    expect(events.map((event) => event.kind === 'run' && event.taskId)).toEqual([ids[3], ids[1], ids[2], ids[0]]);
  });

  it('holds back the run rows after the first one past the horizon, merges rows and tasks in time order, and sends each once', async () => {
    await db.execute('DELETE FROM punctual_tasks');
    await db.execute('DELETE FROM punctual_task_runs');
    const task = await doneTask(4000);
    const a = await runRow(task, 3000);
    const b = await runRow(task, 6000); // past the horizon below
    const c = await runRow(task, 3500); // a lower finish, but after b in id order
    const head = { runs: a - 1, changes: 0, done: START };
    const first = await readAll(head, 5000);
    expect(first.events.map((event) => (event.kind === 'run' ? (event.id ?? `task ${event.taskId}`) : 'change'))).toEqual([
      a,
      `task ${task}`,
    ]);
    // Past it, in id order: a position never goes back, so each row is sent once.
    const second = await readAll(first.position, 10_000);
    expect(second.events.map((event) => event.kind === 'run' && event.id)).toEqual([b, c]);
    expect((await readAll(second.position, 10_000)).events).toEqual([]);
  });

  it('never stands still on a full page of rows that runs back in time', async () => {
    await db.execute('DELETE FROM punctual_tasks');
    await db.execute('DELETE FROM punctual_task_runs');
    const task = await doneTask(100);
    const rows = [await runRow(task, 5000), await runRow(task, 4000), await runRow(task, 4500), await runRow(task, 3000)];
    const { events } = await readAll(
      { runs: rows[0]! - 1, changes: 0, done: { finishedAt: BASE + 100, runAt: BASE + 90, id: task } },
      10_000,
      2,
    );
    expect(events.map((event) => event.kind === 'run' && event.id)).toEqual(rows);
  });
});
