/**
 * Reading and listing tasks: one task by id or key, the pages of the API and the console, the
 * counts, and what the scheduler reads to arm timers (due pages, new inserts, expired leases).
 * Read without locks, each on a connection of its own (statements.ts); the statements are
 * sql/tasks.ts's. A read decides nothing: what a shortfall or a stale row means is the lifecycle's.
 */
import type mysql from 'mysql2/promise';
import type { Database } from '../db/connection.js';
import { runAtValues, toEntries } from './rows.js';
import { SQL } from './sql/tasks.js';
import { cursorValues, prefixPattern, Statements, typedCursorValues } from './statements.js';
import type { FinishedStatus, ListFilters, ListKey, RunAtCursor, Status, Task, TimerEntry } from './task-types.js';

/** A page's rows that fit in `maxBytes` (at least one), each counted as its stored size plus `rowBytes`. */
/** A sort key's values for listSeek and countBefore: (run_at, run_at, id), or (finished_at, finished_at, run_at, run_at, id). */
function seekValues(key: ListKey, finished: boolean): unknown[] {
  const runAt = new Date(key.runAt);
  if (!finished) return [runAt, runAt, key.id];
  const at = new Date(key.finishedAt ?? 0);
  return [at, at, runAt, runAt, key.id];
}

function fitting(sizes: readonly [number, number][], limit: number, maxBytes: number, rowBytes: number): number[] {
  const ids: number[] = [];
  let bytes = 0;
  for (const [id, size] of sizes.slice(0, limit)) {
    bytes += Number(size) + rowBytes;
    if (ids.length > 0 && bytes > maxBytes) break;
    ids.push(Number(id));
  }
  return ids;
}

export class TaskReads {
  readonly #sql: Statements;
  /** The types whose tasks get no timer (worker types: the pull hub watches them); read at each refill. */
  readonly #untimed: () => readonly string[];

  constructor(database: Database, untimed: () => readonly string[] = () => []) {
    this.#sql = new Statements(database);
    this.#untimed = untimed;
  }

  /** The tasks of `keys` (a batch's keys that were taken). */
  byKeys(keys: readonly string[]): Promise<Task[]> {
    return keys.length === 0 ? Promise.resolve([]) : this.#sql.tasks(SQL.byKeys, [keys]);
  }

  async get(id: number): Promise<Task | undefined> {
    return (await this.#sql.tasks(SQL.byId, [id]))[0];
  }

  async getByKey(key: string): Promise<Task | undefined> {
    return (await this.#sql.tasks(SQL.byKey, [key]))[0];
  }

  /**
   * A page of pending tasks bounded in bytes as well as in rows: the rows' sizes are read first,
   * then only the rows that fit within `maxBytes` (at least one), each counted as its stored size
   * plus `rowBytes`. `more` says whether pending tasks follow the page.
   */
  async listPendingWithin(options: {
    type?: string;
    tag?: string;
    keyPrefix?: string;
    limit: number;
    after?: RunAtCursor;
    maxBytes: number;
    rowBytes: number;
  }): Promise<{ tasks: Task[]; more: boolean }> {
    const { type, tag, keyPrefix, after } = options;
    const filter = { type: type !== undefined, tag: tag !== undefined, keyPrefix: keyPrefix !== undefined, cursor: after !== undefined };
    const sizes = await this.#sql.arrays<[number, number]>(SQL.pendingSizes(filter), [
      ...(type === undefined ? [] : [type]),
      ...(tag === undefined ? [] : [tag]),
      ...(keyPrefix === undefined ? [] : [prefixPattern(keyPrefix)]),
      ...(type === undefined ? cursorValues(after) : typedCursorValues(after)),
      options.limit + 1,
    ]);
    const ids = fitting(sizes, options.limit, options.maxBytes, options.rowBytes);
    if (ids.length === 0) return { tasks: [], more: false };
    return { tasks: await this.#sql.tasks(SQL.pendingByIds, [ids]), more: sizes.length > ids.length };
  }

  /** The pending occurrence of the recurring series whose first task is `seriesId`. */
  async pendingOccurrence(seriesId: number): Promise<Task | undefined> {
    return (await this.#sql.tasks(SQL.pendingOccurrence, [seriesId, seriesId]))[0];
  }

  /** The latest tasks to finish with `status`, newest first. */
  listFinished(status: FinishedStatus, limit: number): Promise<Task[]> {
    return this.#sql.tasks(SQL.finished, [status, limit]);
  }

  /**
   * One page of pending tasks due in (from, until], in (runAt, id) order after `cursor`.
   * `from` undefined means from the beginning of time (the boot load and the reconcile); with
   * `shards`, only the tasks of those shards.
   */
  async pendingDueBetween(
    from: number | undefined,
    until: number,
    cursor: RunAtCursor | undefined,
    limit: number,
    shards?: readonly number[],
  ): Promise<TimerEntry[]> {
    if (shards !== undefined && shards.length === 0) return [];
    const values: unknown[] = from === undefined ? [] : [new Date(from)];
    values.push(new Date(until), ...(shards === undefined ? [] : [shards]), ...cursorValues(cursor), limit);
    const page = toEntries(
      await this.#sql.arrays<[number, number, number]>(SQL.duePage(from !== undefined, cursor !== undefined, shards !== undefined), values),
    );
    // The page is read on the (status, run_at) index alone, which has no type: its worker tasks
    // are found on the (type, status, run_minute, run_at) index, over the page's span, and marked.
    const untimed = this.#untimed();
    if (untimed.length === 0 || page.length === 0) return page;
    const found = await this.#sql.arrays<[number]>(SQL.pendingOfTypesBetween, [
      untimed,
      ...runAtValues(new Date(page[0]!.runAt)),
      ...runAtValues(new Date(page.at(-1)!.runAt)),
    ]);
    if (found.length === 0) return page;
    const ids = new Set(found.map(([id]) => Number(id)));
    for (const entry of page) if (ids.has(entry.id)) entry.untimed = true;
    return page;
  }

  /** Rows with id above `afterId`, any status, in id order: the refill's view of new inserts (`pending`: pending and wants a timer, not a worker type's). */
  async insertedAfter(afterId: number, limit: number): Promise<(TimerEntry & { pending: boolean })[]> {
    const untimed = this.#untimed();
    const rows = await this.#sql.arrays<[number, number, number, number]>(SQL.insertedAfter(untimed.length > 0), [
      ...(untimed.length > 0 ? [untimed] : []),
      afterId,
      limit,
    ]);
    return rows.map(insertedRow);
  }

  /** Rows with an id in one of the inclusive `ranges`, any status: inserts that committed below the id scan. */
  async insertedIn(ranges: readonly (readonly [number, number])[]): Promise<(TimerEntry & { pending: boolean })[]> {
    if (ranges.length === 0) return [];
    const untimed = this.#untimed();
    const rows = await this.#sql.arrays<[number, number, number, number]>(SQL.insertedIn(ranges.length, untimed.length > 0), [
      ...(untimed.length > 0 ? [untimed] : []),
      ...ranges.flat(),
    ]);
    return rows.map(insertedRow);
  }

  /** The pending ones among `ids`, read without locks. */
  async pendingAmong(ids: number[]): Promise<TimerEntry[]> {
    if (ids.length === 0) return [];
    return toEntries(await this.#sql.arrays<[number, number, number]>(SQL.pendingAmong, [ids]));
  }

  async maxId(): Promise<number> {
    const [row] = await this.#sql.arrays<[number]>(SQL.maxId, []);
    return Number(row?.[0] ?? 0);
  }

  /** Tasks waiting, running and failed, in the whole table. */
  async countOpen(): Promise<{ pending: number; running: number; failed: number }> {
    const rows = await this.#sql.query<({ status: string; n: number } & mysql.RowDataPacket)[]>(SQL.countOpen, []);
    const count = (status: string) => Number(rows.find((row) => row.status === status)?.n ?? 0);
    return { pending: count('pending'), running: count('running'), failed: count('failed') };
  }

  /** Pending tasks per type, in the whole table. */
  async countPendingByType(): Promise<Map<string, number>> {
    const rows = await this.#sql.arrays<[string, number]>(SQL.countPendingByType, []);
    return new Map(rows.map(([type, count]) => [type, Number(count)]));
  }

  /** How late (start − run_at, ms, stored by each run) the latest `limit` completed tasks ran, sorted. */
  /** The latest `limit` done runs' lateness (sorted) and the waits of those that waited (sorted). */
  async recentLateness(limit: number): Promise<{ lateness: number[]; waits: number[] }> {
    const rows = await this.#sql.arrays<[number, number]>(SQL.recentLateness, [limit]);
    return {
      lateness: rows.map(([late]) => Number(late)).sort((a, b) => a - b),
      waits: rows
        .map(([, waited]) => Number(waited))
        .filter((waited) => waited > 0)
        .sort((a, b) => a - b),
    };
  }

  /**
   * A page of the tasks in `status` with the filters, from `offset`: open ones soonest first,
   * finished ones newest first. Bounded in bytes as listPendingWithin is; `more` says whether
   * tasks follow the page. A task that changed status between the two reads is shown as it is now.
   */
  async listByStatus(
    status: Status,
    filters: ListFilters,
    page: { offset: number; limit: number; maxBytes: number; rowBytes: number },
  ): Promise<{ tasks: Task[]; more: boolean }> {
    const finished = status !== 'pending' && status !== 'running';
    const sizes = await this.#sql.arrays<[number, number]>(SQL.listSizes({ ...this.#filterShape(filters), finished }), [
      status,
      ...this.#filterValues(filters),
      page.limit + 1,
      page.offset,
    ]);
    const ids = fitting(sizes, page.limit, page.maxBytes, page.rowBytes);
    if (ids.length === 0) return { tasks: [], more: false };
    return { tasks: await this.#sql.tasks(SQL.listByIds(finished), [ids]), more: sizes.length > ids.length };
  }

  /**
   * A page of the tasks in one status by keyset: after `key` in the list's order (`forward`), or
   * before it; without a key, the first page or (backwards) the last. The tasks come in the list's
   * order; `more` says the list goes on past the page in the direction read.
   */
  async listSeek(
    status: Status,
    filters: ListFilters,
    page: { key?: ListKey; forward: boolean; limit: number; maxBytes: number; rowBytes: number },
  ): Promise<{ tasks: Task[]; more: boolean }> {
    const finished = status !== 'pending' && status !== 'running';
    const shape = { ...this.#filterShape(filters), finished };
    const sizes = await this.#sql.arrays<[number, number]>(SQL.listSeek(shape, { forward: page.forward, key: page.key !== undefined }), [
      status,
      ...this.#filterValues(filters),
      ...(page.key === undefined ? [] : seekValues(page.key, finished)),
      page.limit + 1,
    ]);
    const ids = fitting(sizes, page.limit, page.maxBytes, page.rowBytes);
    if (ids.length === 0) return { tasks: [], more: false };
    return { tasks: await this.#sql.tasks(SQL.listByIds(finished), [ids]), more: sizes.length > ids.length };
  }

  /** How many tasks in the status with the filters come before `key` in the list's order. */
  async countBefore(status: Status, filters: ListFilters, key: ListKey): Promise<number> {
    const finished = status !== 'pending' && status !== 'running';
    const rows = await this.#sql.arrays<[number]>(SQL.countBefore({ ...this.#filterShape(filters), finished }), [
      status,
      ...this.#filterValues(filters),
      ...seekValues(key, finished),
    ]);
    return Number(rows[0]?.[0] ?? 0);
  }

  /**
   * The tasks `text` finds, newest first, at most `limit`: the task with that id, those whose key
   * is it or starts with it, those whose key's last part (after a colon) is it, those tagged it;
   * and how many tasks have it as a tag (the search shows a tag's whole count, not only a page).
   */
  async search(text: string, limit: number, asTag: boolean): Promise<{ tasks: Task[]; tagged: number }> {
    const id = /^\d{1,15}$/.test(text) ? Number(text) : undefined;
    const values: unknown[] = [
      ...(id === undefined ? [] : [id]),
      prefixPattern(text),
      limit,
      text,
      limit,
      ...(asTag ? [text, limit] : []),
      limit,
    ];
    const [rows, tagged] = await Promise.all([
      this.#sql.arrays<[number]>(SQL.search({ id: id !== undefined, tag: asTag }), values),
      asTag ? this.#sql.arrays<[number]>(SQL.countTagged, [text]) : Promise.resolve([[0]] as [number][]),
    ]);
    const ids = rows.map(([found]) => Number(found));
    const tasks = ids.length === 0 ? [] : await this.#sql.tasks(SQL.listByIds(true), [ids]);
    const order = new Map(ids.map((found, index) => [found, index]));
    return { tasks: tasks.sort((a, b) => order.get(a.id)! - order.get(b.id)!), tagged: Number(tagged[0]?.[0] ?? 0) };
  }

  /** How many tasks of each status the filters hold (every status named, 0 when none). */
  async countByStatus(filters: ListFilters): Promise<Record<Status, number>> {
    const rows = await this.#sql.arrays<[string, number]>(SQL.countByStatus(this.#filterShape(filters)), this.#filterValues(filters));
    const counts: Record<Status, number> = { pending: 0, running: 0, done: 0, failed: 0, cancelled: 0, skipped: 0 };
    for (const [status, n] of rows) if (status in counts) counts[status as Status] = Number(n);
    return counts;
  }

  #filterShape(filters: ListFilters) {
    return {
      type: filters.type !== undefined,
      tag: filters.tag !== undefined,
      keyPrefix: filters.keyPrefix !== undefined,
      group: filters.group !== undefined,
      series: filters.series !== undefined,
      from: filters.from !== undefined,
      until: filters.until !== undefined,
    };
  }

  #filterValues(filters: ListFilters): unknown[] {
    return [
      ...(filters.type === undefined ? [] : [filters.type]),
      ...(filters.tag === undefined ? [] : [filters.tag]),
      ...(filters.keyPrefix === undefined ? [] : [prefixPattern(filters.keyPrefix)]),
      ...(filters.group === undefined ? [] : [filters.group]),
      ...(filters.series === undefined ? [] : [filters.series, filters.series]),
      ...(filters.from === undefined ? [] : [new Date(filters.from)]),
      ...(filters.until === undefined ? [] : [new Date(filters.until)]),
    ];
  }

  /** Ids of pending tasks with misfire 'skip' whose time passed before `before`; with `shards`, of those shards only. */
  async misfiredIds(before: number, shards?: readonly number[]): Promise<number[]> {
    if (shards !== undefined && shards.length === 0) return [];
    const values = [new Date(before), ...(shards === undefined ? [] : [shards])];
    return (await this.#sql.arrays<[number]>(SQL.misfiredIds(shards !== undefined), values)).map(([id]) => Number(id));
  }

  /** When the first lease of a running task (in `shards`) ends; undefined when none runs. */
  async earliestLeaseEnd(shards?: readonly number[]): Promise<number | undefined> {
    if (shards !== undefined && shards.length === 0) return undefined;
    const [row] = await this.#sql.arrays<[Date | null]>(SQL.earliestLeaseEnd(shards !== undefined), shards === undefined ? [] : [shards]);
    const end = row?.[0];
    return end === undefined || end === null ? undefined : end.getTime();
  }

  /** Ids of running tasks whose lease ran out before `now`; with `shards`, of those shards only. */
  async expiredLeaseIds(now: number, shards?: readonly number[]): Promise<number[]> {
    if (shards !== undefined && shards.length === 0) return [];
    const values = [new Date(now), ...(shards === undefined ? [] : [shards])];
    return (await this.#sql.arrays<[number]>(SQL.expiredLeaseIds(shards !== undefined), values)).map(([id]) => Number(id));
  }
}

/** [id, runAt, timed, priority] as read by insertedAfter and insertedIn: `pending` is true for a pending task that wants a timer. */
function insertedRow([id, runAt, pending, priority]: [number, number, number, number]): TimerEntry & { pending: boolean } {
  return { id: Number(id), runAt: Number(runAt), pending: Number(pending) === 1, priority: Number(priority) };
}
