/**
 * punctual's own tables. Migrations in drizzle/ are generated from this file
 * (`npm run db:generate`) and create nothing but these; the shop's tables are the shop's.
 *
 * Every column but type, payload and run_at has a default, so a shop can enqueue a task inside
 * its own order transaction with `INSERT INTO tasks (type, payload, run_at) VALUES (...)`.
 * Times are DATETIME(3) in UTC; the defaults use UTC_TIMESTAMP(3), not NOW(3), so a shop's
 * connection in another session time_zone still writes UTC.
 */
import { sql } from 'drizzle-orm';
import { decodeJson } from '../util/json.js';
import {
  bigint,
  customType,
  datetime,
  index,
  int,
  mysqlEnum,
  mysqlTable,
  smallint,
  text,
  uniqueIndex,
  varchar,
} from 'drizzle-orm/mysql-core';

export const TASK_STATUSES = ['pending', 'running', 'done', 'failed', 'cancelled', 'skipped'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const MISFIRE_POLICIES = ['run', 'skip'] as const;
export type MisfirePolicy = (typeof MISFIRE_POLICIES)[number];

/** JSON column that reads back the same on MySQL (native JSON) and MariaDB (LONGTEXT + CHECK). */
const jsonColumn = customType<{ data: unknown; driverData: string | object }>({
  dataType: () => 'json',
  toDriver: (value) => JSON.stringify(value),
  fromDriver: decodeJson,
});

const utcNow = sql`(UTC_TIMESTAMP(3))`;

export const tasks = mysqlTable(
  'tasks',
  {
    id: bigint('id', { mode: 'number', unsigned: true }).autoincrement().primaryKey(),
    key: varchar('task_key', { length: 191 }).unique('tasks_task_key_unique'),
    type: varchar('type', { length: 64 }).notNull(),
    payload: jsonColumn('payload').notNull(),
    runAt: datetime('run_at', { mode: 'date', fsp: 3 }).notNull(),
    timezone: varchar('timezone', { length: 64 }).notNull().default('UTC'),
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
  },
  (table) => [
    index('tasks_status_run_at').on(table.status, table.runAt),
    // The latest runs and failures, for the dashboard.
    index('tasks_status_finished_at').on(table.status, table.finishedAt),
    // One task per occurrence of a series, however many times its predecessor completes.
    uniqueIndex('tasks_series_run_at').on(table.seriesId, table.runAt),
  ],
);

/**
 * Several instances (SHARDING=on, src/cluster/): each live process has a row here, its heartbeat
 * written in database time by its lease keeper.
 */
export const members = mysqlTable('members', {
  id: varchar('id', { length: 64 }).primaryKey(),
  heartbeatAt: datetime('heartbeat_at', { mode: 'date', fsp: 3 }).notNull(),
});

/**
 * Who runs the tasks of each of the 256 shards (a task's shard is `id MOD 256`, fixed for good).
 * A lease is held until lease_until (database time); epoch counts the changes of owner.
 */
export const shardLeases = mysqlTable('shard_leases', {
  shard: smallint('shard', { unsigned: true }).primaryKey(),
  owner: varchar('owner', { length: 64 }),
  epoch: bigint('epoch', { mode: 'number', unsigned: true }).notNull().default(0),
  leaseUntil: datetime('lease_until', { mode: 'date', fsp: 3 }),
});
