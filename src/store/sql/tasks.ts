/**
 * Every SQL statement about the tasks table (and its tags), by name, in one style: text written out once (built
 * once for the few with variants), with `?` placeholders for mysql2. A statement that compares
 * with "now" takes it as a placeholder, so tests can move time. Times come back as epoch
 * milliseconds computed by the server (see rows.ts), so no statement depends on a time zone.
 *
 * To find a query, look for its name here; to see who runs it, look for the name in task-store.ts.
 * The other tables' statements are beside it (one file per table), the server's in src/db/sql.ts.
 */
import { lateFromSql, ms, runAtIs, runAtRange, TASK_COLUMNS } from '../rows.js';
import { forceIndex } from './index-hints.js';
import { LOST_ERROR } from './task-runs.js';
import { RESERVED_KEY_PREFIX } from '../task-types.js';

/** Only the tasks of the listed shards (`id MOD 256`, src/cluster/shards.ts): the id is in every
 * secondary index entry, so the filter is read from the index too. */
const IN_SHARDS = ' AND id MOD 256 IN (?)';
/**
 * An open task (pending or running) has no finished_at. Reads of open tasks name it, so that the
 * (status, finished_at, run_at, id, priority) index serves them as (status, run_at): finished_at is
 * NULL there, an equality. One index for open and finished tasks, not one each: every index that
 * holds status is rewritten at every firing (bench BW).
 */
const OPEN = 'finished_at IS NULL';
/** Finished tasks newest first, in the same index's order (ties on finished_at by run_at, then id).
 * Qualified: unqualified, `finished_at` is the select list's epoch-ms alias, and sorting by it
 * reads every row of the status. */
const NEWEST_FIRST = 'punctual_tasks.finished_at DESC, punctual_tasks.run_at DESC, punctual_tasks.id DESC';

/** Whether a row wants a timer: pending, and with `untimed`, not of the types ? (the statement's first value). */
const timed = (untimed: boolean) => (untimed ? "status = 'pending' AND type NOT IN (?)" : "status = 'pending'");

/** (run_at, id) after a cursor, one form for every keyset page: the leading `run_at >= ?` states
 * the index range's start outright, the OR only breaks ties within one run_at. */
const AFTER_CURSOR = ' AND run_at >= ? AND (run_at > ? OR id > ?)';

/** A type's tasks in one status, in run_at order: the (type, status, run_minute, run_at) index,
 * read in its own order (run_minute never decreases with run_at; rows.ts, runAtRange). */
const byType = () => forceIndex('tasks_type_status_run_minute_run_at');

/** Not a task punctual owns (RESERVED_KEY_PREFIX holds no LIKE wildcard): what a bulk change may pick. */
const notReserved = (table = '') => `(${table}task_key IS NULL OR ${table}task_key NOT LIKE '${RESERVED_KEY_PREFIX}%')`;
/** AFTER_CURSOR on that index: its run_at also as a range on (run_minute, run_at), so the page
 * seeks there; `<` for a walk in the reverse order. */
const afterTypedCursor = (after: '>' | '<') => ` AND ${runAtRange(`${after}=`)} AND (run_at ${after} ? OR id ${after} ?)`;
const AFTER_TYPED_CURSOR = afterTypedCursor('>');

const select = (where: string) => `SELECT ${TASK_COLUMNS} FROM punctual_tasks ${where}`;

/** Which filters a pending list has (each one a placeholder, in this order). */
export interface PendingFilter {
  type: boolean;
  tag: boolean;
  keyPrefix: boolean;
  cursor: boolean;
}

/**
 * Pending tasks in (run_at, id) order: optionally of one type, with a tag, with a key prefix,
 * after a cursor. Of one type, on the type's index, in its order, from the cursor on (its cursor:
 * AFTER_TYPED_CURSOR; left to itself the optimizer may read the type's range from its start).
 */
const pendingWhere = (f: PendingFilter) =>
  `${f.type ? byType() : ''} WHERE status = 'pending' AND ${OPEN}${f.type ? ' AND type = ?' : ''}` +
  `${f.tag ? ' AND id IN (SELECT task_id FROM punctual_task_tags WHERE tag = ?)' : ''}` +
  `${f.keyPrefix ? " AND task_key LIKE ? ESCAPE '!'" : ''}` +
  `${f.cursor ? (f.type ? AFTER_TYPED_CURSOR : AFTER_CURSOR) : ''} ORDER BY ${f.type ? 'run_minute, ' : ''}run_at, id LIMIT ?`;

/** Which filters a list by status has (each one a placeholder after the status, in this order). */
export interface ListFilter {
  type: boolean;
  tag: boolean;
  keyPrefix: boolean;
  group?: boolean;
  /** The tasks of a recurring series: its first task (id ?) and its occurrences (series_id ?). */
  series?: boolean;
  /** run_at at or after ?, and before ?. */
  from?: boolean;
  until?: boolean;
  /** A finished status (done, failed, cancelled, skipped): ordered by finished_at, newest first. */
  finished: boolean;
}

const filtersWhere = (f: Omit<ListFilter, 'finished'>, first: 'WHERE' | 'AND') => {
  const parts = [
    ...(f.type ? ['type = ?'] : []),
    ...(f.tag ? ['id IN (SELECT task_id FROM punctual_task_tags WHERE tag = ?)'] : []),
    ...(f.keyPrefix ? ["task_key LIKE ? ESCAPE '!'"] : []),
    ...(f.group ? ['group_key = ?'] : []),
    ...(f.series ? ['(id = ? OR series_id = ?)'] : []),
    ...(f.from ? ['run_at >= ?'] : []),
    ...(f.until ? ['run_at < ?'] : []),
  ];
  return parts.length === 0 ? '' : `${first} ${parts.join(' AND ')}`;
};
const listWhere = (f: ListFilter) => `WHERE status = ?${f.finished ? '' : ` AND ${OPEN}`} ${filtersWhere(f, 'AND')}`;
const listOrder = (finished: boolean) => (finished ? NEWEST_FIRST : 'run_at, id');
/**
 * A row's place in a list: after (`forward`) or before a sort key. Open tasks: (run_at, id) = (?, ?,
 * ?) ascending; finished ones: (finished_at, run_at, id) descending, values (?, ?, ?, ?, ?).
 */
const seekWhere = (finished: boolean, forward: boolean) => {
  if (!finished) {
    const op = forward ? '>' : '<';
    return `(run_at ${op} ? OR (run_at = ? AND id ${op} ?))`;
  }
  const op = forward ? '<' : '>';
  return `(finished_at ${op} ? OR (finished_at = ? AND (run_at ${op} ? OR (run_at = ? AND id ${op} ?))))`;
};
/** listSizesOrder, or its reverse for a page read backwards from a key. */
const seekOrder = (f: ListFilter, forward: boolean) => {
  const order = listSizesOrder(f);
  return forward
    ? order
    : order
        .split(', ')
        .map((part) => (part.endsWith(' DESC') ? part.slice(0, -5) : `${part} DESC`))
        .join(', ');
};
/** An open status's page of one type: on the type's index, in its order (the same as run_at, id). */
const listSizesOrder = (f: ListFilter) => (!f.finished && f.type ? 'run_minute, run_at, id' : listOrder(f.finished));

/** The wait of a row among `waited` (id, ms) pairs, 0 for the others (most batches: none waited, a constant). */
function waitOf(waited: number): string {
  return waited === 0 ? '0' : `CASE id ${'WHEN ? THEN ? '.repeat(waited)}ELSE 0 END`;
}

/** What each of `waited` tasks (id, reason pairs) waited for; the others did not wait. */
function reasonOf(waited: number): string {
  return waited === 0 ? 'NULL' : `CASE id ${'WHEN ? THEN ? '.repeat(waited)}ELSE NULL END`;
}

export const SQL = {
  // ── reads ───────────────────────────────────────────────────────────────────────────────
  byId: select('WHERE id = ?'),
  byKey: select('WHERE task_key = ?'),
  /** The tasks of the keys among ?: a batch's taken keys, in one query. */
  byKeys: select('WHERE task_key IN (?)'),
  /** The pending occurrence of the series whose first task is ? (given twice). */
  pendingOccurrence: select("WHERE status = 'pending' AND (id = ? OR series_id = ?) ORDER BY run_at LIMIT 1"),
  finished: select(`WHERE status = ? ORDER BY ${NEWEST_FIRST} LIMIT ?`),
  /** What each row of a pending page weighs, read without bringing its payload over: pages are bounded in bytes on it. */
  pendingSizes: (filter: PendingFilter) =>
    `SELECT id, LENGTH(payload) + COALESCE(LENGTH(last_error), 0) + COALESCE(LENGTH(task_key), 0) FROM punctual_tasks ${pendingWhere(filter)}`,
  pendingByIds: select("WHERE id IN (?) AND status = 'pending' ORDER BY run_at, id"),
  /**
   * A page of the tasks in one status (GET /tasks), as [id, stored size], by offset: open tasks
   * soonest first on (status, run_at), finished ones newest first on (status, finished_at).
   */
  listSizes: (filter: ListFilter) =>
    `SELECT id, LENGTH(payload) + COALESCE(LENGTH(last_error), 0) + COALESCE(LENGTH(task_key), 0) FROM punctual_tasks ${listWhere(filter)}` +
    ` ORDER BY ${listSizesOrder(filter)} LIMIT ? OFFSET ?`,
  /**
   * A page of the tasks in one status by keyset (the console's pages, as deep as the backlog
   * goes): after (`forward`) or before a row's sort key in the list's order, nearest first, so a
   * page before a row is read backwards and turned round by the caller; with no key, the list's
   * first or (backwards) last page. Open tasks by (run_at, id), finished ones by (finished_at,
   * run_at, id) newest first: the same indexes as listSizes, entered at the key, not counted up to
   * an offset. Values: the status, the filters', the key's (seekValues), the limit.
   */
  listSeek: (filter: ListFilter, seek: { forward: boolean; key: boolean }) =>
    `SELECT id, LENGTH(payload) + COALESCE(LENGTH(last_error), 0) + COALESCE(LENGTH(task_key), 0) FROM punctual_tasks ${listWhere(filter)}` +
    (seek.key ? ` AND ${seekWhere(filter.finished, seek.forward)}` : '') +
    ` ORDER BY ${seekOrder(filter, seek.forward)} LIMIT ?`,
  /** How many tasks in the status with the filters come before a row's sort key: a keyset page's place. Values as listSeek's, without the limit. */
  countBefore: (filter: ListFilter) => `SELECT COUNT(*) FROM punctual_tasks ${listWhere(filter)} AND ${seekWhere(filter.finished, false)}`,
  /**
   * The console's search, one box for an id, a key, a key's start, a key's last part and a tag, as
   * [id], newest first: each part a seek on an index of its own (the primary key; the key's unique
   * index by a prefix, the exact key among them; key_tail's, migration 0026; the tags' (tag,
   * task_id)), each bounded, so an answer reads at most a few pages on any backlog. Values: (the id,
   * when `byId`), the prefix pattern, a limit, the tail, a limit, the tag (when `byTag`), a limit,
   * the limit.
   */
  search: (by: { id: boolean; tag: boolean }) =>
    'SELECT id FROM (' +
    [
      ...(by.id ? ['(SELECT id FROM punctual_tasks WHERE id = ?)'] : []),
      "(SELECT id FROM punctual_tasks WHERE task_key LIKE ? ESCAPE '!' ORDER BY task_key LIMIT ?)",
      `(SELECT id FROM punctual_tasks ${forceIndex('tasks_key_tail')} WHERE key_tail = ? ORDER BY key_tail, id DESC LIMIT ?)`,
      ...(by.tag ? ['(SELECT task_id FROM punctual_task_tags WHERE tag = ? ORDER BY task_id DESC LIMIT ?)'] : []),
    ].join(' UNION ') +
    ') AS found ORDER BY id DESC LIMIT ?',
  /** How many tasks have the tag ?: the (tag, task_id) index's range, counted. */
  countTagged: 'SELECT COUNT(*) FROM punctual_task_tags WHERE tag = ?',
  /** The tasks of a page, in its order, as they are now. */
  listByIds: (finished: boolean) => select(`WHERE id IN (?) ORDER BY ${listOrder(finished)}`),
  /** How many tasks of each status the filter holds, as [status, count]. */
  countByStatus: (filter: Omit<ListFilter, 'finished'>) =>
    `SELECT status, COUNT(*) FROM punctual_tasks ${filtersWhere(filter, 'WHERE')} GROUP BY status`,
  /**
   * Pending tasks due in (from, until] after a cursor, as [id, runAt]: the (status, run_at) index
   * alone. With `shards`, only those of the listed shards (IN_SHARDS). */
  duePage: (lower: boolean, cursor: boolean, shards = false) =>
    `SELECT id, ${ms('run_at')}, priority FROM punctual_tasks WHERE status = 'pending' AND ${OPEN}${lower ? ' AND run_at > ?' : ''} AND run_at <= ?` +
    `${shards ? IN_SHARDS : ''}${cursor ? AFTER_CURSOR : ''} ORDER BY run_at, id LIMIT ?`,
  /**
   * Rows above an id, any status, as [id, runAt, timed, priority]: the refill's view of new
   * inserts. `timed`: pending, and with `untimed` not of one of the types ? given first (worker
   * types: the pull hub watches those, they get no timer).
   */
  insertedAfter: (untimed: boolean) =>
    `SELECT id, ${ms('run_at')}, ${timed(untimed)}, priority FROM punctual_tasks WHERE id > ? ORDER BY id LIMIT ?`,
  /**
   * Rows in `ranges` id ranges (each `id BETWEEN ? AND ?`), as insertedAfter's: the refill's check
   * of the gaps its id scan left, for inserts that committed late. A range with no row in it is
   * one look into the primary key, however wide.
   */
  insertedIn: (ranges: number, untimed: boolean) =>
    `SELECT id, ${ms('run_at')}, ${timed(untimed)}, priority FROM punctual_tasks WHERE ${Array.from({ length: ranges }, () => 'id BETWEEN ? AND ?').join(' OR ')}`,
  /** Pending tasks of the types ? due in [?, ?] (each instant as runAtValues), as [id]: the worker tasks among a due page (the type's index alone). */
  get pendingOfTypesBetween() {
    return `SELECT id FROM punctual_tasks ${byType()}
    WHERE type IN (?) AND status = 'pending' AND ${runAtRange('>=')} AND ${runAtRange('<=')}`;
  },
  pendingAmong: `SELECT id, ${ms('run_at')}, priority FROM punctual_tasks WHERE id IN (?) AND status = 'pending'`,
  maxId: 'SELECT COALESCE(MAX(id), 0) FROM punctual_tasks',
  /**
   * Open tasks that carry a finished_at (punctual never writes one; a row written by hand or by a
   * tool might), as [id], read without locks: the index's own range, empty as a rule. A locking
   * range UPDATE would lock that range's edge, a row another process may hold, and wait for it.
   */
  openFinishedIds: "SELECT id FROM punctual_tasks WHERE status IN ('pending', 'running') AND finished_at IS NOT NULL LIMIT 1000",
  /** Those among ? still open with a finished_at: cleared, as the reads of open tasks expect (OPEN). */
  clearFinishedAt:
    "UPDATE punctual_tasks SET finished_at = NULL WHERE id IN (?) AND status IN ('pending', 'running') AND finished_at IS NOT NULL",
  countOpen: "SELECT status, COUNT(*) AS n FROM punctual_tasks WHERE status IN ('pending', 'running', 'failed') GROUP BY status",
  countPendingByType: "SELECT type, COUNT(*) FROM punctual_tasks WHERE status = 'pending' GROUP BY type",
  /** The types that have pending tasks: one look into the (type, status, …) index per type. */
  get pendingTypes() {
    return `SELECT DISTINCT type FROM punctual_tasks ${byType()} WHERE status = 'pending'`;
  },
  /**
   * The upcoming-load chart: pending tasks of the types ? per minute (run_minute, whole minutes
   * from 1970), for the minutes in [?, ?). The type's index alone, read over that range of each
   * type only and in its order, so the groups stream out with no temporary table.
   */
  get upcomingLoad() {
    return `SELECT run_minute, type, COUNT(*) AS n
    FROM punctual_tasks ${byType()}
   WHERE type IN (?) AND status = 'pending' AND run_minute >= ? AND run_minute < ?
   GROUP BY type, run_minute`;
  },
  /** Pending tasks due before ?, stopped at ? entries: a count over the (status, run_at) index alone. */
  get countDueBefore() {
    return `SELECT COUNT(*) AS n FROM (
    SELECT 1 FROM punctual_tasks ${forceIndex('tasks_status_run_at')} WHERE status = 'pending' AND ${OPEN} AND run_at < ? LIMIT ?
  ) AS due`;
  },
  /**
   * The stored lateness and wait of the latest runs (start − run_at − wait; a row inserted done by
   * hand falls back to finished_at − run_at), as [lateness, waited].
   */
  recentLateness: `SELECT COALESCE(lateness_ms, TIMESTAMPDIFF(MICROSECOND, ${lateFromSql()}, finished_at) / 1000), COALESCE(waited_ms, 0) FROM punctual_tasks
    WHERE status = 'done' ORDER BY ${NEWEST_FIRST} LIMIT ?`,

  // ── intake ──────────────────────────────────────────────────────────────────────────────
  /** `tuples`: rows of insertTuple(), comma-separated; with `returning`, MariaDB answers each row's id. */
  insertRows: (tuples: string, returning: boolean) =>
    'INSERT INTO punctual_tasks (task_key, type, payload, run_at, requested_run_at, timezone, max_attempts, misfire, cron, tags, created_at, updated_at, priority, latest_run_at, expire_after_ms, group_key, trace_parent, trace_state) VALUES ' +
    tuples +
    (returning ? ' RETURNING id' : ''),
  /**
   * `tuples`: rows of tagTuples() of tasks just inserted, in their transaction. `again`: the
   * occurrence may be there already (insertOccurrence found it), and so may its tags.
   */
  insertTags: (tuples: string, again = false) =>
    'INSERT INTO punctual_task_tags (task_id, tag) VALUES ' + tuples + (again ? ' ON DUPLICATE KEY UPDATE tag = tag' : ''),
  /** The next occurrence of a series; if it is there already, LAST_INSERT_ID answers its id. */
  insertOccurrence: `INSERT INTO punctual_tasks (type, payload, run_at, timezone, max_attempts, misfire, cron, series_id, tags, created_at, updated_at, priority, trace_parent, trace_state)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`,

  // Every write below that finishes, fails, retries or moves a task names the state it expects
  // (invariant 13, docs/architecture.md#invariants), even under a lock the same transaction took: its affected rows
  // (matched rows: mysql2 sets FOUND_ROWS) tell the caller whether the task was still in it.

  // ── bulk changes (a chunk of ids at a time, picked with an index, after a cursor) ─────────
  // Each pick takes the status it selects as its second placeholder: pending for a cancel or a
  // move, failed for a retry.
  /** Tasks with a tag and a status, as [id, id]: the (tag, task_id) index in id order. */
  pickByTag: `SELECT g.task_id, g.task_id FROM punctual_task_tags g JOIN punctual_tasks t ON t.id = g.task_id
    WHERE g.tag = ? AND t.status = ? AND ${notReserved('t.')} AND g.task_id > ? ORDER BY g.task_id LIMIT ?`,
  /**
   * Tasks of a type with a status, as [id, runAt ms]: the (type, status, run_minute, run_at) index
   * in its order or the reverse, within a bound on run_at (its values first), after a cursor
   * (run_at, id; afterTypedCursor's values). The walk is the caller's
   * (lifecycle/bulk.ts): a move must not meet the tasks it has moved again.
   */
  pickByType: (walk: { descending: boolean; bound: '<' | '>' | '=' | undefined; cursor: boolean }) => {
    const [after, order] = walk.descending ? (['<', ' DESC'] as const) : (['>', ''] as const);
    const bound = walk.bound === undefined ? '' : ` AND ${walk.bound === '=' ? runAtIs : `(${runAtRange(walk.bound)})`}`;
    const cursor = walk.cursor ? afterTypedCursor(after) : '';
    return (
      `SELECT id, ${ms('run_at')} FROM punctual_tasks ${byType()} WHERE type = ? AND status = ? AND ${notReserved()}${bound}${cursor}` +
      ` ORDER BY run_minute${order}, run_at${order}, id${order} LIMIT ?`
    );
  },
  /** Tasks whose key starts with a prefix (a LIKE pattern, `!` escapes), as [id, key]: the key's unique index in key order. */
  pickByKeyPrefix: `SELECT id, task_key FROM punctual_tasks WHERE task_key LIKE ? ESCAPE '!' AND status = ? AND ${notReserved()} AND task_key > ? ORDER BY task_key LIMIT ?`,
  /** Every task with a status, as [id, id], in id order (a Failed view's retry or delete of all). */
  pickAll: `SELECT id, id FROM punctual_tasks ${forceIndex('tasks_status_run_at')} WHERE status = ? AND ${notReserved()} AND id > ? ORDER BY id LIMIT ?`,
  /** The tasks among the ids ? with a status, as [id, id]: the primary key, in id order. */
  pickByIds: `SELECT id, id FROM punctual_tasks WHERE id IN (?) AND status = ? AND ${notReserved()} AND id > ? ORDER BY id LIMIT ?`,
  /** The pending ones among ?, locked, as [id, runAt, timezone, bulk_request_id]. */
  lockPendingToMove: `SELECT id, ${ms('run_at')}, timezone, bulk_request_id, priority, type FROM punctual_tasks WHERE id IN (?) AND status = 'pending' ORDER BY id FOR UPDATE`,
  /** The locked pending ones moved to one instant; the zone only when one is given. */
  moveTo:
    "UPDATE punctual_tasks SET run_at = ?, requested_run_at = ?, timezone = COALESCE(?, timezone), updated_at = ? WHERE id IN (?) AND status = 'pending'",
  /** The locked pending ones moved by a duration (not before the move's time, the second ?), stamped with the request that moved them. */
  shiftBy:
    "UPDATE punctual_tasks SET requested_run_at = COALESCE(requested_run_at, run_at) + INTERVAL ? MICROSECOND, run_at = GREATEST(run_at + INTERVAL ? MICROSECOND, ?), bulk_request_id = ?, updated_at = ? WHERE id IN (?) AND status = 'pending'",

  // ── the shop's changes ──────────────────────────────────────────────────────────────────
  /** pending → cancelled, for the ids among ? that are pending. */
  cancel: "UPDATE punctual_tasks SET status = 'cancelled', finished_at = ?, updated_at = ? WHERE id IN (?) AND status = 'pending'",
  /**
   * A pending task moves to another instant (read in another zone): the instant the shop asks for
   * now, so a repeated create compares with it (requested_run_at, as moveTo and retry set it).
   */
  reschedule:
    "UPDATE punctual_tasks SET run_at = ?, requested_run_at = ?, timezone = ?, updated_at = ? WHERE id IN (?) AND status = 'pending'",
  /**
   * A create with onKeyConflict "replace" found its key on a pending task: the task takes the new
   * payload, zone, priority and instant in one statement (a run sees the old version or the new,
   * never a mix). The ceiling is set by the first replace that gives one and kept after; the
   * instant is held to it. Values: ceiling or NULL, runAt, runAt, runAt, payload, zone,
   * priority, now, id, type.
   */
  replacePending: `UPDATE punctual_tasks SET latest_run_at = COALESCE(latest_run_at, ?),
    run_at = LEAST(?, COALESCE(latest_run_at, ?)), requested_run_at = ?, payload = ?, timezone = ?, priority = ?, updated_at = ?
    WHERE id = ? AND status = 'pending' AND type = ? AND cron IS NULL`,
  /** failed → pending with its attempts reset. */
  retry:
    "UPDATE punctual_tasks SET status = 'pending', attempts = 0, run_at = ?, requested_run_at = ?, timezone = ?, finished_at = NULL, updated_at = ? WHERE id IN (?) AND status = 'failed'",

  /** failed → pending at ? with its attempts reset, each in its own zone: a bulk retry. */
  retryInZone:
    "UPDATE punctual_tasks SET status = 'pending', attempts = 0, run_at = ?, requested_run_at = ?, finished_at = NULL, updated_at = ? WHERE id IN (?) AND status = 'failed'",
  // ── claiming and finishing runs ─────────────────────────────────────────────────────────
  /** The due pending tasks among ?, locked in id order; rows another transaction holds are skipped. */
  lockDue: select("WHERE id IN (?) AND status = 'pending' AND run_at <= ? ORDER BY id FOR UPDATE SKIP LOCKED"),
  /**
   * Run in this transaction: one attempt used, done (last_error and the outside call's fields
   * cleared: they describe the latest run), and how late it started (the batch's start, given as
   * the first ?, − run_at − its wait), its wait for its type and what for, what it answered, the
   * process that ran it (done_by: the run's record, run-history.ts) and its finish, all in the
   * same statement: the hot path adds no query and no row. `waited`: how many of the tasks
   * waited, each an (id, ms) pair after the first ?, twice, then (id, reason) pairs; `results`:
   * (id, result) pairs; then done_by, finished_at, updated_at, the ids.
   */
  markDone: (
    waited: number,
    results = 0,
  ) => `UPDATE punctual_tasks SET lateness_ms = TIMESTAMPDIFF(MICROSECOND, ${lateFromSql()}, ?) DIV 1000 - ${waitOf(waited)},
    waited_ms = ${waitOf(waited)}, wait_reason = ${reasonOf(waited)},
    last_result = ${results === 0 ? 'NULL' : `CASE id ${'WHEN ? THEN ? '.repeat(results)}ELSE NULL END`}, status = 'done', done_by = ?,
    attempts = attempts + 1, finished_at = ?, updated_at = ?, last_error = NULL, last_http_status = NULL, last_duration_ms = NULL,
    last_response_bytes = NULL WHERE id IN (?) AND status = 'pending'`,
  /** Claimed for an outside handler: running under a lease; its lateness (the claim, the first ?, − run_at − its wait) and its wait (as markDone's) with it. */
  markRunning: (
    waited: number,
  ) => `UPDATE punctual_tasks SET lateness_ms = TIMESTAMPDIFF(MICROSECOND, ${lateFromSql()}, ?) DIV 1000 - ${waitOf(waited)},
    waited_ms = ${waitOf(waited)}, wait_reason = ${reasonOf(waited)}, status = 'running',
    attempts = attempts + 1, lease_owner = ?, lease_until = ?, updated_at = ? WHERE id IN (?) AND status = 'pending'`,
  /**
   * An outside run finished, while it is still the run this owner leased (running, its lease, the
   * attempt its claim counted); its call (status, duration, size) kept, and done_by as markDone's.
   */
  completeLeased: `UPDATE punctual_tasks SET status = 'done', done_by = ?, finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL, last_error = NULL,
    last_http_status = ?, last_duration_ms = ?, last_response_bytes = ?, last_result = ?
    WHERE id = ? AND status = 'running' AND lease_owner = ? AND attempts = ?`,
  /**
   * A failed run of a task claimed pending (a database handler's, in its batch or after it lost
   * its transaction): pending again at a later run_at, or failed for good, the attempt counted.
   * Only while the task is as it was claimed: pending, at the same attempts and run_at. A cancel,
   * a reschedule or another process's run that came first leaves it otherwise, and wins.
   */
  failClaimed: `UPDATE punctual_tasks SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, attempts = attempts + 1,
    last_error = ?, updated_at = ?
    WHERE id = ? AND status = 'pending' AND attempts = ? AND run_at = ?`,
  /**
   * A failed outside run (its attempt counted by the claim), its call kept: pending again at a
   * later run_at, or failed for good. Only while it is still the run this owner leased.
   */
  failLeased: `UPDATE punctual_tasks SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, last_error = ?,
    lease_owner = NULL, lease_until = NULL, updated_at = ?, last_http_status = ?, last_duration_ms = ?, last_response_bytes = ?
    WHERE id = ? AND status = 'running' AND lease_owner = ? AND attempts = ?`,

  // ── the scheduler's repairs ─────────────────────────────────────────────────────────────
  // Each repair reads its ids without locks (of some shards, or of all) and locks them by id after:
  // a locking range read would lock every row it walks past, other shards' too, and wait for them.
  /** Overdue tasks that asked to be skipped, as [id]. */
  misfiredIds: (shards: boolean) =>
    `SELECT id FROM punctual_tasks WHERE status = 'pending' AND ${OPEN} AND run_at < ? AND misfire = 'skip'${shards ? IN_SHARDS : ''}`,
  lockMisfired: select("WHERE id IN (?) AND status = 'pending' AND run_at < ? FOR UPDATE"),
  /** The locked pending ones skipped (misfired, or waited for their type too long). */
  markSkipped:
    "UPDATE punctual_tasks SET status = 'skipped', finished_at = ?, updated_at = ?, last_error = ? WHERE id IN (?) AND status = 'pending'",
  /** Running tasks whose lease ran out (their process died mid-run), as [id]. */
  /** When the first lease of a running task ends (NULL: none runs). */
  earliestLeaseEnd: (shards: boolean) =>
    `SELECT MIN(lease_until) FROM punctual_tasks WHERE status = 'running' AND ${OPEN}${shards ? IN_SHARDS : ''}`,
  expiredLeaseIds: (shards: boolean) =>
    `SELECT id FROM punctual_tasks WHERE status = 'running' AND ${OPEN} AND lease_until < ?${shards ? IN_SHARDS : ''}`,
  lockExpiredLeases: select("WHERE id IN (?) AND status = 'running' AND lease_until < ? FOR UPDATE"),
  /** A lease ran out on the task's last attempt: failed for good. */
  failExpiredLeases: `UPDATE punctual_tasks SET status = 'failed', lease_owner = NULL, lease_until = NULL, finished_at = ?, updated_at = ?,
    last_error = CONCAT('lease expired on its last attempt; ', COALESCE(last_error, ''))
    WHERE id IN (?) AND status = 'running' AND lease_until < ?`,
  /** A lease ran out with attempts left: pending again, its lastError the lost run's (it describes the latest run). */
  releaseExpiredLeases: `UPDATE punctual_tasks SET status = 'pending', lease_owner = NULL, lease_until = NULL, updated_at = ?, last_error = '${LOST_ERROR}'
    WHERE id IN (?) AND status = 'running' AND lease_until < ?`,

  // ── the type controls' view of the tasks (type-controls.ts; their own table: sql/type-controls.ts)
  /** Pending tasks already due, by type: what waits (paused, over a limit, or simply behind). */
  /**
   * Pending tasks of type ? due by ? (as runAtValues), stopped at ? entries: the type's index
   * alone, so a count never walks more than the cap of one type's due tasks (store/type-due.ts).
   */
  get countDueOfType() {
    return `SELECT COUNT(*) FROM (
    SELECT 1 FROM punctual_tasks ${byType()} WHERE type = ? AND status = 'pending' AND ${runAtRange('<=')} LIMIT ?
  ) AS due`;
  },

  // ── retention (maintenance/retention.ts, through the store) ──────────────────────────────
  /**
   * Ids of up to ? tasks in status ? that finished before ?, found through the
   * (status, finished_at) index. The first task of a recurring series carries the series' key and
   * its id is the series' id: while the series has an occurrence to come, that task stays.
   */
  expiredIds: `SELECT id FROM punctual_tasks
    WHERE status = ? AND finished_at < ?
      AND NOT (cron IS NOT NULL AND series_id IS NULL
        AND EXISTS (SELECT 1 FROM punctual_tasks occurrence WHERE occurrence.series_id = punctual_tasks.id AND occurrence.status IN ('pending', 'running')))
    LIMIT ?`,
  /**
   * Those among ? still in status ? and finished before ?, by primary key, locked, as [id]: a
   * failed task retried since expiredIds read it is pending again and stays; a second sweep at
   * once finds nothing.
   */
  lockExpired: 'SELECT id FROM punctual_tasks WHERE id IN (?) AND status = ? AND finished_at < ? FOR UPDATE',
  /** The tasks ?, locked by lockExpired in this transaction. */
  deleteByIds: 'DELETE FROM punctual_tasks WHERE id IN (?)',

  // ── the operator's deletes and edits (the console, any client) ───────────────────────────
  /**
   * Those among ? in one of the statuses ?, locked, as [id]: a delete takes only tasks in the
   * state it expects. The first task of a recurring series stays while the series goes on (its id
   * is the series').
   */
  lockToDelete: `SELECT id FROM punctual_tasks WHERE id IN (?) AND status IN (?)
      AND NOT (cron IS NOT NULL AND series_id IS NULL
        AND EXISTS (SELECT 1 FROM punctual_tasks occurrence WHERE occurrence.series_id = punctual_tasks.id AND occurrence.status IN ('pending', 'running')))
    ORDER BY id FOR UPDATE`,
  /** A pending task's payload replaced (a fix before it runs); its instant, key and tags stay. */
  updatePayload: "UPDATE punctual_tasks SET payload = ?, updated_at = ? WHERE id = ? AND status = 'pending'",
} as const;
