/**
 * The task store: every SQL statement about the tasks table lives here, named for what it does.
 * Statements that compare with "now" take it as a parameter, so tests can move time.
 */
import { and, asc, eq, gt, inArray, lt, lte, or, sql, type SQL } from 'drizzle-orm';
import type { Database, Db } from '../db/connection.js';
import { isDuplicateKey } from '../db/errors.js';
import { tasks, type MisfirePolicy, type TaskRow, type TaskStatus } from '../db/schema.js';

/** A task as the service sees it; times are epoch milliseconds. */
export interface Task {
  id: number;
  key: string | null;
  type: string;
  payload: unknown;
  status: TaskStatus;
  runAt: number;
  timezone: string;
  attempts: number;
  maxAttempts: number;
  misfire: MisfirePolicy;
  leaseOwner: string | null;
  leaseUntil: number | null;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

export interface NewTask {
  key: string | null;
  type: string;
  payload: unknown;
  runAt: number;
  timezone: string;
  maxAttempts: number;
  misfire: MisfirePolicy;
}

/** What a timer needs: no payload, which is loaded when the task fires. */
export interface TimerEntry {
  id: number;
  runAt: number;
  type: string;
}

/** Position in (runAt, id) order, for keyset pagination. */
export interface RunAtCursor {
  runAt: number;
  id: number;
}

/** What happens to a task whose run failed: back to pending at `retryAt`, or failed for good. */
export interface Failure {
  id: number;
  error: string;
  retryAt: number | null;
}

export type InsertResult = { created: true; task: Task } | { created: false; task: Task };

const MAX_ERROR_LENGTH = 2000;

function toTask(row: TaskRow): Task {
  return {
    id: row.id,
    key: row.key,
    type: row.type,
    payload: row.payload,
    status: row.status,
    runAt: row.runAt.getTime(),
    timezone: row.timezone,
    attempts: row.attempts,
    maxAttempts: row.maxAttempts,
    misfire: row.misfire,
    leaseOwner: row.leaseOwner,
    leaseUntil: row.leaseUntil?.getTime() ?? null,
    lastError: row.lastError,
    createdAt: row.createdAt.getTime(),
    updatedAt: row.updatedAt.getTime(),
    finishedAt: row.finishedAt?.getTime() ?? null,
  };
}

function clip(error: string): string {
  return error.length > MAX_ERROR_LENGTH ? `${error.slice(0, MAX_ERROR_LENGTH - 1)}…` : error;
}

/** (run_at, id) strictly after `cursor`; uses the (status, run_at) index, whose entries carry id. */
function after(cursor: RunAtCursor | undefined): SQL | undefined {
  if (cursor === undefined) return undefined;
  const at = new Date(cursor.runAt);
  return or(gt(tasks.runAt, at), and(eq(tasks.runAt, at), gt(tasks.id, cursor.id)));
}

const timerColumns = { id: tasks.id, runAt: tasks.runAt, type: tasks.type };

function toTimerEntry(row: { id: number; runAt: Date; type: string }): TimerEntry {
  return { id: row.id, runAt: row.runAt.getTime(), type: row.type };
}

export class TaskStore {
  constructor(private readonly database: Database) {}

  private get db(): Db {
    return this.database.db;
  }

  // ── the shop's requests ────────────────────────────────────────────────────────────────────

  /**
   * Inserts a task; committed when this returns (autocommit). A repeated `key` does not insert:
   * the existing task comes back with `created: false` for the caller to compare.
   */
  async insert(task: NewTask, now: number): Promise<InsertResult> {
    const at = new Date(now);
    try {
      const [result] = await this.db.insert(tasks).values({
        key: task.key,
        type: task.type,
        payload: task.payload,
        runAt: new Date(task.runAt),
        timezone: task.timezone,
        maxAttempts: task.maxAttempts,
        misfire: task.misfire,
        createdAt: at,
        updatedAt: at,
      });
      return {
        created: true,
        task: {
          ...task,
          id: result.insertId,
          status: 'pending',
          attempts: 0,
          leaseOwner: null,
          leaseUntil: null,
          lastError: null,
          createdAt: now,
          updatedAt: now,
          finishedAt: null,
        },
      };
    } catch (error) {
      if (task.key === null || !isDuplicateKey(error)) throw error;
      const existing = await this.getByKey(task.key);
      if (existing === undefined) throw error;
      return { created: false, task: existing };
    }
  }

  async get(id: number): Promise<Task | undefined> {
    const rows = await this.db.select().from(tasks).where(eq(tasks.id, id));
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  async getByKey(key: string): Promise<Task | undefined> {
    const rows = await this.db.select().from(tasks).where(eq(tasks.key, key));
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  /** Pending tasks in (runAt, id) order, strictly after `cursor`. */
  async listPending(options: { type?: string; limit: number; after?: RunAtCursor }): Promise<Task[]> {
    const rows = await this.db
      .select()
      .from(tasks)
      .where(
        and(
          eq(tasks.status, 'pending'),
          options.type === undefined ? undefined : eq(tasks.type, options.type),
          after(options.after),
        ),
      )
      .orderBy(asc(tasks.runAt), asc(tasks.id))
      .limit(options.limit);
    return rows.map(toTask);
  }

  /** pending → cancelled. False when the task is not pending (or does not exist). */
  async cancel(id: number, now: number): Promise<boolean> {
    const at = new Date(now);
    const [result] = await this.db
      .update(tasks)
      .set({ status: 'cancelled', finishedAt: at, updatedAt: at })
      .where(and(eq(tasks.id, id), eq(tasks.status, 'pending')));
    return result.affectedRows === 1;
  }

  /** Moves a pending task to `runAt` (read in `timezone`). False when it is not pending. */
  async reschedule(id: number, runAt: number, timezone: string, now: number): Promise<boolean> {
    const [result] = await this.db
      .update(tasks)
      .set({ runAt: new Date(runAt), timezone, updatedAt: new Date(now) })
      .where(and(eq(tasks.id, id), eq(tasks.status, 'pending')));
    return result.affectedRows === 1;
  }

  // ── the scheduler ─────────────────────────────────────────────────────────────────────────

  /** Pending tasks with misfire 'skip' whose time passed before `before` become skipped. */
  async skipMisfired(before: number, now: number): Promise<number> {
    const at = new Date(now);
    const [result] = await this.db
      .update(tasks)
      .set({ status: 'skipped', finishedAt: at, updatedAt: at, lastError: 'skipped: its time passed while punctual was down' })
      .where(and(eq(tasks.status, 'pending'), lt(tasks.runAt, new Date(before)), eq(tasks.misfire, 'skip')));
    return result.affectedRows;
  }

  /**
   * Running tasks whose lease ran out (their process died mid-run) are pending again, or failed
   * when they have used all their attempts.
   */
  async recoverExpiredLeases(now: number): Promise<{ recovered: number; failed: number }> {
    const at = new Date(now);
    const expired = and(eq(tasks.status, 'running'), lt(tasks.leaseUntil, at));
    const [failed] = await this.db
      .update(tasks)
      .set({
        status: 'failed',
        leaseOwner: null,
        leaseUntil: null,
        finishedAt: at,
        updatedAt: at,
        lastError: sql`CONCAT('lease expired on its last attempt; ', COALESCE(${tasks.lastError}, ''))`,
      })
      .where(and(expired, sql`${tasks.attempts} >= ${tasks.maxAttempts}`));
    const [recovered] = await this.db
      .update(tasks)
      .set({ status: 'pending', leaseOwner: null, leaseUntil: null, updatedAt: at })
      .where(expired);
    return { recovered: recovered.affectedRows, failed: failed.affectedRows };
  }

  /**
   * One page of pending tasks due in (from, until], in (runAt, id) order after `cursor`.
   * `from` undefined means from the beginning of time (the boot load and the reconcile).
   */
  async pendingDueBetween(
    from: number | undefined,
    until: number,
    cursor: RunAtCursor | undefined,
    limit: number,
  ): Promise<TimerEntry[]> {
    const rows = await this.db
      .select(timerColumns)
      .from(tasks)
      .where(
        and(
          eq(tasks.status, 'pending'),
          from === undefined ? undefined : gt(tasks.runAt, new Date(from)),
          lte(tasks.runAt, new Date(until)),
          after(cursor),
        ),
      )
      .orderBy(asc(tasks.runAt), asc(tasks.id))
      .limit(limit);
    return rows.map(toTimerEntry);
  }

  /** Rows with id above `afterId`, any status, in id order: the refill's view of new inserts. */
  async insertedAfter(afterId: number, limit: number): Promise<(TimerEntry & { status: TaskStatus })[]> {
    const rows = await this.db
      .select({ ...timerColumns, status: tasks.status })
      .from(tasks)
      .where(gt(tasks.id, afterId))
      .orderBy(asc(tasks.id))
      .limit(limit);
    return rows.map((row) => ({ ...toTimerEntry(row), status: row.status }));
  }

  /** The pending ones among `ids`, read without locks. */
  async pendingAmong(ids: number[]): Promise<TimerEntry[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .select(timerColumns)
      .from(tasks)
      .where(and(inArray(tasks.id, ids), eq(tasks.status, 'pending')));
    return rows.map(toTimerEntry);
  }

  async maxId(): Promise<number> {
    const rows = await this.db.select({ max: sql<number | null>`MAX(${tasks.id})`.mapWith(Number) }).from(tasks);
    return rows[0]?.max ?? 0;
  }

  // ── the dispatcher (inside its transaction) ───────────────────────────────────────────────

  /**
   * Locks the tasks among `ids` that are pending and due, in id order. Rows another transaction
   * holds are skipped, not waited for: that transaction is running them.
   */
  async lockDue(tx: Db, ids: number[], now: number): Promise<Task[]> {
    const rows = await tx
      .select()
      .from(tasks)
      .where(and(inArray(tasks.id, ids), eq(tasks.status, 'pending'), lte(tasks.runAt, new Date(now))))
      .orderBy(asc(tasks.id))
      .for('update', { skipLocked: true });
    return rows.map(toTask);
  }

  /** Completes tasks run in this transaction: one attempt used, done. */
  async markDone(tx: Db, ids: number[], now: number): Promise<void> {
    if (ids.length === 0) return;
    const at = new Date(now);
    await tx
      .update(tasks)
      .set({ status: 'done', attempts: sql`${tasks.attempts} + 1`, finishedAt: at, updatedAt: at })
      .where(inArray(tasks.id, ids));
  }

  /** Claims tasks for an outside handler: running, with a lease that ends at `leaseUntil`. */
  async markRunning(tx: Db, ids: number[], owner: string, leaseUntil: number, now: number): Promise<void> {
    if (ids.length === 0) return;
    await tx
      .update(tasks)
      .set({
        status: 'running',
        attempts: sql`${tasks.attempts} + 1`,
        leaseOwner: owner,
        leaseUntil: new Date(leaseUntil),
        updatedAt: new Date(now),
      })
      .where(inArray(tasks.id, ids));
  }

  /**
   * Records a failed run: the error, and either pending again at `retryAt` or failed.
   * `countAttempt` is false when the attempt was already counted by the claim.
   */
  async recordFailure(tx: Db, failure: Failure, countAttempt: boolean, now: number, owner?: string): Promise<boolean> {
    const at = new Date(now);
    const [result] = await tx
      .update(tasks)
      .set({
        status: failure.retryAt === null ? 'failed' : 'pending',
        runAt: failure.retryAt === null ? undefined : new Date(failure.retryAt),
        finishedAt: failure.retryAt === null ? at : null,
        attempts: countAttempt ? sql`${tasks.attempts} + 1` : undefined,
        lastError: clip(failure.error),
        leaseOwner: null,
        leaseUntil: null,
        updatedAt: at,
      })
      .where(
        owner === undefined
          ? eq(tasks.id, failure.id)
          : and(eq(tasks.id, failure.id), eq(tasks.status, 'running'), eq(tasks.leaseOwner, owner)),
      );
    return result.affectedRows === 1;
  }

  /** Completes a task an outside handler ran, if this process still holds its lease. */
  async completeLeased(id: number, owner: string, now: number): Promise<boolean> {
    const at = new Date(now);
    const [result] = await this.db
      .update(tasks)
      .set({ status: 'done', finishedAt: at, updatedAt: at, leaseOwner: null, leaseUntil: null })
      .where(and(eq(tasks.id, id), eq(tasks.status, 'running'), eq(tasks.leaseOwner, owner)));
    return result.affectedRows === 1;
  }

  failLeased(failure: Failure, owner: string, now: number): Promise<boolean> {
    return this.recordFailure(this.db, failure, false, now, owner);
  }
}
