/**
 * punctual's own tables. Migrations in drizzle/ are generated from this file
 * (`npm run db:generate`) and create nothing but these; the shop's tables are the shop's.
 *
 * Every column but type, payload and run_at has a default, so a shop can enqueue a task inside
 * its own order transaction with `INSERT INTO punctual_tasks (type, payload, run_at) VALUES (...)`.
 * Times are DATETIME(3) in UTC; the defaults use UTC_TIMESTAMP(3), not NOW(3), so a shop's
 * connection in another session time_zone still writes UTC.
 */
import { sql } from 'drizzle-orm';
import { MAX_KEY_LENGTH, MAX_TAG_LENGTH, MAX_TYPE_LENGTH, MAX_ZONE_LENGTH, MISFIRE_POLICIES, TASK_STATUSES } from '../contract/limits.js';
import { decodeJson } from '../util/json.js';
import {
  bigint,
  boolean,
  customType,
  datetime,
  decimal,
  foreignKey,
  index,
  int,
  mysqlEnum,
  mysqlTable,
  primaryKey,
  smallint,
  text,
  tinyint,
  uniqueIndex,
  varchar,
} from 'drizzle-orm/mysql-core';

/** JSON column that reads back the same on MySQL (native JSON) and MariaDB (LONGTEXT + CHECK). */
const jsonColumn = customType<{ data: unknown; driverData: string | object }>({
  dataType: () => 'json',
  toDriver: (value) => JSON.stringify(value),
  fromDriver: decodeJson,
});

const utcNow = sql`(UTC_TIMESTAMP(3))`;

/**
 * The collation of keys, tags and type names: binary (case-exact) and NO PAD (a trailing space
 * counts), so `SALE` is not `sale` and `pad:1 ` is not `pad:1`, in the unique indexes and in
 * every lookup. This is MariaDB's name; on MySQL 8 the migrator writes its equivalent,
 * utf8mb4_0900_bin, in its place (migrate.ts, exactCollationFor).
 */
export const EXACT_COLLATION = 'utf8mb4_nopad_bin';

/** A VARCHAR compared byte for byte, trailing spaces included (EXACT_COLLATION). */
const exactVarchar = customType<{ data: string; driverData: string; config: { length: number } }>({
  dataType: (config) => `varchar(${config?.length ?? 255}) CHARACTER SET utf8mb4 COLLATE ${EXACT_COLLATION}`,
});

export const tasks = mysqlTable(
  'punctual_tasks',
  {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    key: exactVarchar('task_key', { length: MAX_KEY_LENGTH }).unique('tasks_task_key_unique'),
    type: exactVarchar('type', { length: MAX_TYPE_LENGTH }).notNull(),
    payload: jsonColumn('payload').notNull(),
    runAt: datetime('run_at', { mode: 'date', fsp: 3 }).notNull(),
    /**
     * The instant the shop asked for (at create, reschedule or retry), which a retry's backoff
     * never moves: a repeated create is compared with it. Null on a row a shop inserted straight
     * (its run_at is what it asked for, until the backoff moves it).
     */
    requestedRunAt: datetime('requested_run_at', { mode: 'date', fsp: 3 }),
    timezone: varchar('timezone', { length: MAX_ZONE_LENGTH }).notNull().default('UTC'),
    status: mysqlEnum('status', TASK_STATUSES).notNull().default('pending'),
    attempts: int('attempts', { unsigned: true }).notNull().default(0),
    maxAttempts: int('max_attempts', { unsigned: true }).notNull().default(4),
    misfire: mysqlEnum('misfire', MISFIRE_POLICIES).notNull().default('run'),
    leaseOwner: varchar('lease_owner', { length: 64 }),
    leaseUntil: datetime('lease_until', { mode: 'date', fsp: 3 }),
    lastError: text('last_error'),
    createdAt: datetime('created_at', { mode: 'date', fsp: 3 }).notNull().default(utcNow),
    updatedAt: datetime('updated_at', { mode: 'date', fsp: 3 }).notNull().default(utcNow),
    finishedAt: datetime('finished_at', { mode: 'date', fsp: 3 }),
    /** A recurring task's cron expression (five fields), read in `timezone`. */
    cron: varchar('cron', { length: 120 }),
    /** The first task of a recurring series; each occurrence is a task of its own. */
    seriesId: bigint('series_id', { mode: 'number', unsigned: true }),
    /** The task's tags as given at create (a JSON array), for display; punctual_task_tags is what is searched. */
    tags: jsonColumn('tags'),
    /**
     * How late the latest run started, of what punctual controls: its start − run_at − waited_ms,
     * in ms. 64 bits: a task run weeks overdue (after a long outage) is more than a 32-bit count of
     * ms late.
     */
    latenessMs: bigint('lateness_ms', { mode: 'number' }),
    /** How long the latest run waited for its type's pause or limits before it started, in ms (0: it did not). */
    waitedMs: int('waited_ms', { unsigned: true }),
    /** The latest outside (webhook) run: the HTTP status it got, how long it took, the response size. */
    lastHttpStatus: smallint('last_http_status', { unsigned: true }),
    lastDurationMs: int('last_duration_ms', { unsigned: true }),
    lastResponseBytes: int('last_response_bytes', { unsigned: true }),
    /** What the latest successful run's handler answered (`closed`, `already paid`, a webhook's status), cut to 200 characters. */
    lastResult: varchar('last_result', { length: 200 }),
    /**
     * A task done with the run history on: the process that ran it (lease_owner's form), or the
     * pull lease's digest. Its successful run is on record here and in no run row of its own
     * (store/run-history.ts); null on a task done without the history, or by 0.1.0.
     */
    doneBy: varchar('done_by', { length: 64 }),
    /** What the latest run waited for the longest before it started (`pause` or `limit`); null when it did not wait. */
    waitReason: mysqlEnum('wait_reason', ['pause', 'limit']),
    /** The W3C trace context of the create (observability/tracing.ts): each run's span continues it. Null without one. */
    traceParent: varchar('trace_parent', { length: 55 }),
    traceState: varchar('trace_state', { length: 512 }),
    /** The requestId of the latest bulk shift that moved this task: a repeat of it moves it no further. */
    bulkRequestId: varchar('bulk_request_id', { length: 64 }),
    /** Whole minutes from 1970-01-01 to run_at, computed by the server: the upcoming-load chart's bucket. */
    /** Among tasks due now or overdue, a higher priority is claimed first (MIN_PRIORITY..MAX_PRIORITY). */
    priority: tinyint('priority').notNull().default(0),
    /**
     * Debounce with a ceiling (onKeyConflict "replace" with maxDelayMs): the latest run_at a
     * replace may push the task to, fixed by the first create that gave maxDelayMs.
     */
    latestRunAt: datetime('latest_run_at', { mode: 'date', fsp: 3 }),
    /** Expiry: an attempt that would start more than this many ms after the asked runAt is skipped instead. */
    expireAfterMs: int('expire_after_ms', { unsigned: true }),
    /** The task's group, on any type: the limits of a type with `groupBy: "group"` apply per value of it. */
    groupKey: exactVarchar('group_key', { length: MAX_TAG_LENGTH }),
    runMinute: int('run_minute').generatedAlwaysAs(sql`(TIMESTAMPDIFF(MINUTE, '1970-01-01 00:00:00', \`run_at\`))`, { mode: 'virtual' }),
    /**
     * The key's last part after a colon (`SN104500` of `close_order:SN104500`), computed by the
     * server: the console's search finds a task by it on its index (migration 0026).
     */
    keyTail: varchar('key_tail', { length: MAX_KEY_LENGTH }).generatedAlwaysAs(sql`(SUBSTRING_INDEX(\`task_key\`, ':', -1))`, {
      mode: 'virtual',
    }),
  },
  (table) => [
    // Open and finished tasks in one index (bench BW: each index that holds status is rewritten at
    // every firing). An open task's finished_at is NULL, so the reads of open tasks (which say
    // `finished_at IS NULL`, store/sql/tasks.ts OPEN) range over (run_at, id) as on a (status,
    // run_at) index: the due pages read (id, run_at, priority) from it alone, in (run_at, id)
    // order. Finished tasks come newest first by finished_at (the dashboard's latest runs and
    // failures, retention). The name is the one the (status, run_at) index had: the previous
    // release names it in a hint.
    index('tasks_status_run_at').on(table.status, table.finishedAt, table.runAt, table.id, table.priority),
    // One task per occurrence of a series, however many times its predecessor completes.
    uniqueIndex('tasks_series_run_at').on(table.seriesId, table.runAt),
    // A type's tasks by status in time order, by minute: pull workers lease a worker type's due tasks
    // oldest first from here (store/sql/pulls.ts), bulk changes by type walk a status of it in
    // run_at order (lifecycle/bulk.ts, typeWalks; it took a (type, status) index of its own until
    // migration 0023: 8 pages touched a firing), and the upcoming-load chart counts pending
    // tasks per type and minute from it alone, in its order: grouped by (type, run_minute), the
    // groups come one after another, with no temporary table (grouped by an expression of run_at
    // they would need one, 3x the reading itself on a 5,000,000-row backlog). run_minute is a
    // function of run_at that never decreases, so ORDER BY run_minute, run_at, id is run_at's own
    // order and the index's: the statements that read it name run_minute (a range on it and the
    // order) so that it serves them without a sort. One index for both, not one each: every index
    // that holds status is rewritten at every firing (bench BW: 8-9 pages touched a firing each).
    index('tasks_type_status_run_minute_run_at').on(table.type, table.status, table.runMinute, table.runAt),
    index('tasks_key_tail').on(table.keyTail),
  ],
);

/**
 * A task's tags, one row each. (tag, task_id) makes "the tasks tagged X" an index range scan in
 * id order, which is how bulk changes walk them in chunks; a task's rows go with it (cascade), so
 * retention needs no second delete.
 */
export const taskTags = mysqlTable(
  'punctual_task_tags',
  {
    taskId: bigint('task_id', { mode: 'number', unsigned: true }).notNull(),
    tag: exactVarchar('tag', { length: MAX_TAG_LENGTH }).notNull(),
  },
  (table) => [
    primaryKey({ name: 'task_tags_pk', columns: [table.taskId, table.tag] }),
    index('task_tags_tag_task').on(table.tag, table.taskId),
    foreignKey({ name: 'task_tags_task_fk', columns: [table.taskId], foreignColumns: [tasks.id] }).onDelete('cascade'),
  ],
);

/**
 * What an operator set for a task type: paused (its due tasks wait, none is claimed), and limits
 * on its runs: at most `max_concurrency` running at once and at most `rate_per_second` starts in
 * any second, per value of the payload field `group_by` when set (per merchant, per webhook
 * host). A type without a row runs freely. Each process applies the limits to its own runs.
 */
export const typeControls = mysqlTable('punctual_type_controls', {
  type: exactVarchar('type', { length: MAX_TYPE_LENGTH }).primaryKey(),
  paused: boolean('paused').notNull().default(false),
  maxConcurrency: int('max_concurrency', { unsigned: true }),
  ratePerSecond: decimal('rate_per_second', { precision: 10, scale: 3 }),
  groupBy: varchar('group_by', { length: 64 }),
  updatedAt: datetime('updated_at', { mode: 'date', fsp: 3 }).notNull().default(utcNow),
});

/**
 * Several instances (SHARDING=on, src/cluster/): each live process has a row here, its heartbeat
 * written in database time by its lease keeper.
 */
export const members = mysqlTable('punctual_members', {
  id: varchar('id', { length: 64 }).primaryKey(),
  heartbeatAt: datetime('heartbeat_at', { mode: 'date', fsp: 3 }).notNull(),
});

/**
 * Who runs the tasks of each of the 256 shards (a task's shard is `id MOD 256`, fixed for good).
 * A lease is held until lease_until (database time); epoch counts the changes of owner.
 */
export const shardLeases = mysqlTable('punctual_shard_leases', {
  shard: smallint('shard', { unsigned: true }).primaryKey(),
  owner: varchar('owner', { length: 64 }),
  epoch: bigint('epoch', { mode: 'number', unsigned: true }).notNull().default(0),
  leaseUntil: datetime('lease_until', { mode: 'date', fsp: 3 }),
});

/**
 * One row per run of a task (an attempt that started and ended, or whose lease ran out), written
 * by the statement's transaction that records the outcome on the task, so the history never
 * disagrees with the task. `lateness_ms` is the start's lateness of what punctual controls
 * (started_at − the run_at it was due at − waited_ms, the time its type's pause or limits held it);
 * the finish's is finished_at − run_at − waited_ms. A task's runs go with it: retention deletes
 * them in the transaction that deletes the task (store/task-store.ts deleteExpired). No foreign
 * key: its check on every insert cost 2.7 of the 62 pages a firing touches (bench BW), and
 * retention is the only delete of a task. The id orders the runs of every task: GET /events resumes after one.
 */
export const taskRuns = mysqlTable(
  'punctual_task_runs',
  {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    taskId: bigint('task_id', { mode: 'number', unsigned: true }).notNull(),
    attempt: int('attempt', { unsigned: true }).notNull(),
    outcome: mysqlEnum('outcome', ['done', 'retry', 'failed', 'lost']).notNull(),
    /** The run_at the run was due at. */
    dueAt: datetime('due_at', { mode: 'date', fsp: 3 }).notNull(),
    startedAt: datetime('started_at', { mode: 'date', fsp: 3 }).notNull(),
    finishedAt: datetime('finished_at', { mode: 'date', fsp: 3 }).notNull(),
    latenessMs: bigint('lateness_ms', { mode: 'number' }).notNull(),
    /** How long the run waited for its type's pause or limits before it started (not lateness), in ms. */
    waitedMs: int('waited_ms', { unsigned: true }).notNull().default(0),
    /** What it waited for the longest: `pause` or `limit` (maxConcurrency, ratePerSecond); null when it did not wait. */
    waitReason: mysqlEnum('wait_reason', ['pause', 'limit']),
    durationMs: int('duration_ms', { unsigned: true }).notNull(),
    error: text('error'),
    /** What the handler answered (`closed`, `no such order`, …), cut to 200 characters, without control characters. */
    result: varchar('result', { length: 200 }),
    httpStatus: smallint('http_status', { unsigned: true }),
    /** The process that ran it (lease_owner's form: host, pid, a random tag). */
    process: varchar('process', { length: 64 }).notNull(),
  },
  // finished_at: the last hour's runs of the whole fleet (GET /runs/last-hour) are counted from it.
  (table) => [index('task_runs_task').on(table.taskId, table.id), index('task_runs_finished').on(table.finishedAt)],
);

/**
 * The audit trail: one row per change made through the API (cancel, reschedule, retry, bulk
 * changes, pause, resume, limits), with the name of the token that made it, the request's id,
 * what it changed and what came of it. Written before the answer is sent; kept for
 * AUDIT_RETENTION_MS.
 */
export const auditLog = mysqlTable(
  'punctual_audit_log',
  {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    at: datetime('at', { mode: 'date', fsp: 3 }).notNull(),
    /** The token's name (API_TOKENS), or `API_TOKEN`, `read-1`…, or `open` without tokens. */
    actor: varchar('actor', { length: 64 }).notNull(),
    role: varchar('role', { length: 8 }).notNull(),
    requestId: varchar('request_id', { length: 64 }).notNull(),
    /** What was done: cancel, reschedule, retry, bulk-cancel, bulk-reschedule, pause, resume, limits. */
    action: varchar('action', { length: 32 }).notNull(),
    /** What it was done to: `task:<id>`, `key:<key>`, `type:<type>`, `tag:<tag>`, `key-prefix:<prefix>`. */
    target: varchar('target', { length: 255 }).notNull(),
    /** The answer's status code. */
    status: smallint('status', { unsigned: true }).notNull(),
    /** The request's parameters and what came of it (counts, the task's status after). */
    detail: jsonColumn('detail'),
  },
  (table) => [
    index('audit_log_at').on(table.at),
    index('audit_log_actor').on(table.actor, table.id),
    index('audit_log_target').on(table.target, table.id),
  ],
);

/**
 * The fleet's slots under the type limits (dispatch/fleet-slots.ts): `kind` run, one row per run
 * of the group at once (maxConcurrency), held until the run settles or its lease ends; `kind`
 * rate, one row per start the group may make in a window (ratePerSecond), held for the window.
 * A slot is free when leased_until (database time) has passed: a process that dies gives its
 * slots back within its lease. group_digest is '' for a type without groupBy.
 */
export const limitSlots = mysqlTable(
  'punctual_limit_slots',
  {
    type: exactVarchar('type', { length: MAX_TYPE_LENGTH }).notNull(),
    groupDigest: exactVarchar('group_digest', { length: 22 }).notNull(),
    kind: mysqlEnum('kind', ['run', 'rate']).notNull(),
    slot: int('slot', { unsigned: true }).notNull(),
    holder: varchar('holder', { length: 96 }).notNull(),
    leasedUntil: datetime('leased_until', { mode: 'date', fsp: 3 }).notNull(),
  },
  (table) => [primaryKey({ columns: [table.type, table.groupDigest, table.kind, table.slot] })],
);

/**
 * Facts about this database as a whole, one row a name. `test_clock`: every task here was made
 * under TEST_CLOCK=on (app/test-mode.ts); a start with the test clock refuses a database without
 * it that holds tasks, and a start without the test clock takes it away.
 */
export const meta = mysqlTable('punctual_meta', {
  name: exactVarchar('name', { length: 64 }).primaryKey(),
  value: varchar('value', { length: 255 }).notNull(),
  updatedAt: datetime('updated_at', { mode: 'date', fsp: 3 }).notNull().default(utcNow),
});
