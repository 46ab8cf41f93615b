/**
 * Intake group commit: creates arriving together are written by one multi-row INSERT (or one
 * transaction), so they share a commit. This is the hot path of POST /tasks.
 *
 * How each row's id is learned depends on the server (Database.insertIds): MariaDB answers them
 * (RETURNING), MySQL hands out consecutive ids, else one statement per row. A key that is already
 * taken fails a multi-row INSERT as a whole; then one statement per row sorts it out in one
 * transaction, and a repeated key answers the existing task (`created: false`) for the caller to
 * compare. Each write runs through the transaction runner, which runs it again after a deadlock
 * (two batches racing on the same keys in opposite orders) up to BATCH_TRIES in all.
 *
 * A group is many callers' creates: one that the database refuses (for any reason but a lost
 * transaction) must fail its own caller only. So a multi-row INSERT that fails for any such
 * reason falls back to one statement per row, and there each create (its task row and its tag
 * rows) runs inside a savepoint: a refused create is undone whole and the others commit. A
 * duplicate entry is a taken key only when the key's unique index says so; any other duplicate
 * (a tag row) is the create's own failure, never an answer of "the key is taken".
 */
import type mysql from 'mysql2/promise';
import { datetimeLiteral, flatText, type Connection, type Database } from '../db/connection.js';
import { isConnectionError, isDuplicateKey, isLockConflict, rootMessage } from '../db/errors.js';
import { lockConflicts } from '../db/retry.js';
import { DB } from '../db/sql.js';
import { autocommit, transaction } from '../db/transaction.js';
import { Batcher, type Outcome } from '../util/batcher.js';
import { created, TupleWriter } from './rows.js';
import type { NewTask, Task } from './task-types.js';
import { SQL } from './sql/tasks.js';
import { tagTuples } from './tags.js';

export type InsertResult = { created: true; task: Task } | { created: false; task: Task };

/** Creates gathered into one transaction (one commit) at most, and such transactions at once. */
const INSERT_BATCH = 200;
const INSERT_BATCHES_RUNNING = 4;
/** Two batches racing on the same keys in opposite orders can deadlock; the loser runs again. */
const BATCH_TRIES = 3;

type Item = { task: NewTask; now: number };

/** The unique index of task_key (schema.ts): a duplicate entry in it, and only in it, is a taken key. */
const KEY_INDEX = 'tasks_task_key_unique';

function isTakenKey(error: unknown): boolean {
  return isDuplicateKey(error) && rootMessage(error).includes(KEY_INDEX);
}

/** The transaction itself is gone (rolled back, or its connection): nothing of it can go on. */
function isLostTransaction(error: unknown): boolean {
  return isLockConflict(error) || isConnectionError(error);
}

/** The rows of SQL.insertRows for `items`, by one writer; their create instants (one for a batch request) formatted once each. */
function insertTuples(items: readonly Item[]): string {
  const writer = new TupleWriter();
  let tuples = '';
  let atNow = Number.NaN;
  let at = '';
  for (const { task, now } of items) {
    if (now !== atNow) [atNow, at] = [now, datetimeLiteral(now)];
    tuples += (tuples === '' ? '' : ', ') + writer.tuple(task, at);
  }
  return tuples;
}

export class Intake {
  readonly #database: Database;
  readonly #byKey: (key: string) => Promise<Task | undefined>;
  readonly #byKeys: (keys: string[]) => Promise<Task[]>;
  readonly #batcher: Batcher<Item, InsertResult>;

  constructor(database: Database, byKey: (key: string) => Promise<Task | undefined>, byKeys: (keys: string[]) => Promise<Task[]>) {
    this.#database = database;
    this.#byKey = byKey;
    this.#byKeys = byKeys;
    this.#batcher = new Batcher((items) => this.#insertOnce(items), INSERT_BATCH, INSERT_BATCHES_RUNNING);
  }

  /** Inserts a task; committed when this resolves. */
  insert(task: NewTask, now: number): Promise<InsertResult> {
    return this.#batcher.add({ task, now });
  }

  /**
   * A batch's tasks, written together in one transaction: one multi-row INSERT of the tasks and
   * one of their tags, not a statement or a commit per task. Keys: a key already in the table
   * answers its task (`created: false`), found with one query for the whole batch after the
   * INSERT met a taken key; a key repeated within the batch answers the task of its first item.
   * All of the new tasks are committed when this resolves, or none.
   */
  async insertMany(tasks: readonly NewTask[], now: number): Promise<InsertResult[]> {
    const results: InsertResult[] = new Array<InsertResult>(tasks.length);
    const firstOfKey = new Map<string, number>();
    const repeats: [number, number][] = [];
    let todo: number[] = [];
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      const first = task.key === null ? undefined : firstOfKey.get(task.key);
      if (first !== undefined) repeats.push([i, first]);
      else {
        if (task.key !== null) firstOfKey.set(task.key, i);
        todo.push(i);
      }
    }
    const ids = await this.#database.insertIds();
    for (let round = 0; todo.length > 0; round++) {
      const items = todo.map((i) => ({ task: tasks[i]!, now }));
      if (ids === 'one-by-one' || round >= BATCH_TRIES) {
        // Keys taken again and again by racing creates: one statement per row sorts them out.
        const outcomes = await this.#insertOneByOne(items, true);
        for (const [j, outcome] of outcomes.entries()) {
          if (!outcome.ok) throw outcome.error;
          results[todo[j]!] = outcome.value;
        }
        break;
      }
      try {
        const inserted = await this.#insertAll(items, ids);
        for (let j = 0; j < inserted.length; j++) results[todo[j]!] = inserted[j]!;
        todo = [];
      } catch (error) {
        if (!isTakenKey(error)) throw error;
        // Nothing was written. The keys already taken answer their tasks; the rest try again.
        const keys = todo.map((i) => tasks[i]!.key).filter((key): key is string => key !== null);
        const existing = new Map((await this.#byKeys(keys)).map((task) => [task.key!, task]));
        todo = todo.filter((i) => {
          const found = existing.get(tasks[i]!.key ?? '');
          if (found !== undefined) results[i] = { created: false, task: found };
          return found === undefined;
        });
      }
    }
    for (const [i, first] of repeats) results[i] = { created: false, task: results[first]!.task };
    return results;
  }

  async #insertOnce(items: Item[]): Promise<Outcome<InsertResult>[]> {
    const ids = await this.#database.insertIds();
    if (ids !== 'one-by-one' && items.length > 1) {
      try {
        return (await this.#insertAll(items, ids)).map((value) => ({ ok: true, value }));
      } catch (error) {
        // A key already taken, or any create the database refuses, fails the whole statement:
        // then one statement per row sorts it out, failing only the refused create.
        if (isLostTransaction(error)) throw error;
      }
    }
    return this.#insertOneByOne(items);
  }

  /**
   * One multi-row INSERT, committed on its own; with tags, one more multi-row INSERT of the tags
   * in the same transaction, so a task never exists without them.
   */
  async #insertAll(items: Item[], ids: 'returning' | 'consecutive'): Promise<InsertResult[]> {
    const sql = flatText(SQL.insertRows(insertTuples(items), ids === 'returning'));
    const insert = (conn: Connection) => conn.query<mysql.ResultSetHeader & ({ id: number } & mysql.RowDataPacket)[]>(sql);
    const tagged = items.some(({ task }) => (task.tags?.length ?? 0) > 0);
    // On Galera an autocommit INSERT aborted by a replicated write (DDL through another node) is
    // run again by the server, whose RETURNING rows are then those of the aborted run: ids of rows
    // that do not exist. Inside a transaction the abort is an error, and the runner runs it again.
    const inTransaction = tagged || (ids === 'returning' && (await this.#database.galera()));
    const idOf = (result: mysql.ResultSetHeader & { id: number }[], i: number) =>
      ids === 'returning' ? Number(result[i]!.id) : result.insertId + i;
    const retry = lockConflicts(BATCH_TRIES);
    const result = inTransaction
      ? await transaction(
          this.#database,
          async (conn) => {
            const [inserted] = await insert(conn);
            const tags = items
              .map(({ task }, i) => tagTuples(idOf(inserted, i), task.tags ?? []))
              .filter((tuples) => tuples !== '')
              .join(', ');
            if (tags !== '') await conn.query(SQL.insertTags(tags));
            return inserted;
          },
          { retry },
        )
      : (await autocommit(this.#database, insert, { retry }))[0];
    return items.map(({ task, now }, i) => ({ created: true, task: created(task, idOf(result, i), now) }));
  }

  /**
   * One statement per row in one transaction, each create in a savepoint: a taken key, or a create
   * the database refuses, is undone whole (task row and tag rows) and fails its own item only.
   * `allOrNone` (a batch request): a refused create fails them all instead; a taken key still
   * answers its task.
   */
  async #insertOneByOne(items: Item[], allOrNone = false): Promise<Outcome<InsertResult>[]> {
    let taken: number[] = [];
    const outcomes = await transaction(
      this.#database,
      async (conn) => {
        taken = []; // a second try starts over
        const written: Outcome<InsertResult>[] = [];
        for (const [i, { task, now }] of items.entries()) {
          await conn.query(DB.savepoint);
          try {
            const [result] = await conn.query<mysql.ResultSetHeader>(SQL.insertRows(insertTuples([{ task, now }]), false));
            const tags = task.tags ?? [];
            if (tags.length > 0) await conn.query(SQL.insertTags(tagTuples(result.insertId, tags)));
            await conn.query(DB.releaseSavepoint);
            written.push({ ok: true, value: { created: true, task: created(task, result.insertId, now) } });
          } catch (error) {
            if (isLostTransaction(error)) throw error;
            const keyTaken = task.key !== null && isTakenKey(error);
            if (allOrNone && !keyTaken) throw error;
            // Undone whole, so no task row stays without its tags; the transaction goes on.
            await conn.query(DB.rollbackToSavepoint);
            written.push({ ok: false, error });
            if (keyTaken) taken.push(i);
          }
        }
        return written;
      },
      { retry: lockConflicts(BATCH_TRIES) },
    );
    for (const i of taken) {
      const existing = await this.#byKey(items[i]!.task.key!);
      if (existing !== undefined) outcomes[i] = { ok: true, value: { created: false, task: existing } };
    }
    return outcomes;
  }
}
