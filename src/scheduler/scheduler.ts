/**
 * The scheduler decides which tasks have a timer. Only tasks due within HORIZON_MS are armed,
 * so memory follows the horizon, not the backlog.
 *
 * - Boot: skip the misfired tasks that asked for it, recover those whose lease ran out (they were
 *   running, not missed), then read the pending tasks due within the horizon page by page and
 *   arm them.
 * - Refill, every REFILL_INTERVAL_MS: arm the tasks that came within the horizon since the last
 *   refill (a range of the (status, run_at) index) and rows someone inserted straight into the
 *   table (ids above the last one seen). Both cost what is new, not what is armed.
 * - Reconcile, about every RECONCILE_INTERVAL_MS: the safety net. Reads every pending task within
 *   the horizon and arms what is missing or moved, e.g. a row whose insert committed after a
 *   higher id had been seen, or a task another process rescheduled.
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { loggable } from '../db/errors.js';
import type { RunAtCursor, TaskStore, TimerEntry } from '../store/task-store.js';
import type { Metrics } from '../metrics.js';
import type { Dispatcher } from './dispatcher.js';
import type { Timers } from './timers.js';

export interface SchedulerOptions {
  store: TaskStore;
  clock: Clock;
  log: Logger;
  timers: Timers;
  dispatcher: Dispatcher;
  horizonMs: number;
  refillIntervalMs: number;
  reconcileIntervalMs: number;
  misfireGraceMs: number;
  metrics?: Metrics;
}

const PAGE = 10_000;
/** Ids skipped by the id scan are looked at again for this long (their insert may commit late). */
const HOLE_TTL_MS = 60_000;
const MAX_HOLES = 10_000;
/** A jump in ids bigger than this is not a few slow transactions; the reconcile covers it. */
const MAX_GAP = 1000;

export class Scheduler {
  readonly #o: SchedulerOptions;
  /** Every pending task due up to here has a timer (or is with the dispatcher). */
  #coveredUntil = Number.NEGATIVE_INFINITY;
  /** The highest task id the id scan has seen. */
  #lastId = 0;
  /** Ids the id scan jumped over, with when it did. */
  readonly #holes = new Map<number, number>();
  #lastReconcile = 0;
  #booted = false;
  #stopped = false;
  #refillTimer: NodeJS.Timeout | undefined;
  #refilling: Promise<void> | undefined;
  /** A refill was asked for while one ran: run the next one at once. */
  #refillAgain = false;

  constructor(options: SchedulerOptions) {
    this.#o = options;
  }

  get booted(): boolean {
    return this.#booted;
  }

  get armed(): number {
    return this.#o.timers.size;
  }

  async boot(): Promise<void> {
    const { store, clock, log, horizonMs, misfireGraceMs } = this.#o;
    const started = clock.now();
    // Skip before recovering: a task that was mid-run when the process died did not misfire.
    const skipped = await store.skipMisfired(started - misfireGraceMs, started);
    const leases = await store.recoverExpiredLeases(started);
    this.#o.metrics?.leaseRecoveries.inc(leases.recovered + leases.failed);
    // Read the id watermark first: rows inserted while the load runs are found by the id scan.
    this.#lastId = await store.maxId();
    this.#coveredUntil = started + horizonMs;
    const armed = await this.#armDue(undefined, this.#coveredUntil);
    this.#lastReconcile = clock.now();
    this.#booted = true;
    log.info({ armed, recovered: leases.recovered, failedLeases: leases.failed, skipped, ms: clock.now() - started }, 'boot load armed');
    this.#scheduleRefill();
  }

  /**
   * A task this process created, moved or put back after a run: armed now if it is within the
   * horizon, else left to the refill.
   */
  track(id: number, runAt: number): void {
    if (this.#stopped) return;
    if (runAt <= this.#coveredUntil) {
      this.#o.timers.arm(id, runAt);
    } else {
      this.#o.timers.disarm(id);
    }
  }

  untrack(id: number): void {
    this.#o.timers.disarm(id);
  }

  /** One refill (and, when due, a reconcile). Runs on its own timer; public for tests. */
  async refill(): Promise<void> {
    const { clock, horizonMs, reconcileIntervalMs } = this.#o;
    const now = clock.now();
    if (now - this.#lastReconcile >= reconcileIntervalMs) await this.reconcile();
    const previous = this.#coveredUntil;
    const until = now + horizonMs;
    if (until > previous) {
      // Move the bound first: a task created meanwhile is armed by track(), not lost between the two.
      this.#coveredUntil = until;
      try {
        await this.#armDue(previous, until);
      } catch (error) {
        this.#coveredUntil = previous;
        throw error;
      }
    }
    await this.#armInserted();
    await this.#recheckHoles(now);
  }

  /** The safety net: recover expired leases and arm every pending task within the horizon. */
  async reconcile(): Promise<void> {
    const { store, clock, log } = this.#o;
    const started = clock.now();
    const leases = await store.recoverExpiredLeases(started);
    if (leases.recovered + leases.failed > 0) log.warn(leases, 'recovered tasks whose lease ran out');
    this.#o.metrics?.leaseRecoveries.inc(leases.recovered + leases.failed);
    const seen = await this.#armDue(undefined, this.#coveredUntil);
    this.#lastReconcile = started;
    log.debug({ pending: seen, armed: this.armed, ms: clock.now() - started }, 'reconciled');
  }

  /**
   * Hook for clock-watch.ts: the wall clock stepped by `stepMs`. The bookkeeping kept in wall-clock
   * times keeps its age (a backward step must not hold the reconcile off for the step's length),
   * and a refill runs at once: after a forward step the horizon moves to the new time and what
   * came due is armed now. After a backward step what is armed stays armed; the horizon grows
   * again once the clock has caught up.
   */
  followClockStep(stepMs: number): void {
    this.#lastReconcile += stepMs;
    for (const [id, seenAt] of this.#holes) this.#holes.set(id, seenAt + stepMs);
    this.refillSoon();
  }

  /** Runs a refill now (or right after the one running), instead of at the next interval. */
  refillSoon(): void {
    if (this.#stopped || !this.#booted) return;
    if (this.#refilling !== undefined) {
      this.#refillAgain = true;
      return;
    }
    clearTimeout(this.#refillTimer);
    this.#scheduleRefill(0);
  }

  /** Stops the refill and disarms every timer. Safe to call twice. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#refillTimer);
    await this.#refilling;
    this.#o.timers.disarmAll();
  }

  /** Arms a task read from the table, unless the dispatcher has it right now. */
  #arm(entry: TimerEntry): void {
    if (!this.#o.dispatcher.isBusy(entry.id)) this.#o.timers.arm(entry.id, entry.runAt);
  }

  /** Arms the pending tasks due in (from, until], page by page; returns how many were read. */
  async #armDue(from: number | undefined, until: number): Promise<number> {
    let cursor: RunAtCursor | undefined;
    let count = 0;
    for (;;) {
      const page = await this.#o.store.pendingDueBetween(from, until, cursor, PAGE);
      for (const entry of page) this.#arm(entry);
      count += page.length;
      const last = page[page.length - 1];
      if (page.length < PAGE || last === undefined || this.#stopped) return count;
      cursor = { runAt: last.runAt, id: last.id };
    }
  }

  /** Arms rows inserted since the last scan (straight into the table or through the API). */
  async #armInserted(): Promise<void> {
    const now = this.#o.clock.now();
    for (;;) {
      const rows = await this.#o.store.insertedAfter(this.#lastId, PAGE);
      for (const row of rows) {
        if (row.id > this.#lastId + 1 && row.id - this.#lastId <= MAX_GAP) {
          for (let id = this.#lastId + 1; id < row.id && this.#holes.size < MAX_HOLES; id++) this.#holes.set(id, now);
        }
        this.#lastId = row.id;
        if (row.pending && row.runAt <= this.#coveredUntil && !this.#o.timers.has(row.id)) this.#arm(row);
      }
      if (rows.length < PAGE) return;
    }
  }

  /** Ids the scan jumped over may belong to inserts that committed late: look at them again. */
  async #recheckHoles(now: number): Promise<void> {
    for (const [id, seenAt] of this.#holes) if (now - seenAt > HOLE_TTL_MS) this.#holes.delete(id);
    if (this.#holes.size === 0) return;
    for (const entry of await this.#o.store.pendingAmong([...this.#holes.keys()])) {
      this.#holes.delete(entry.id);
      if (entry.runAt <= this.#coveredUntil) this.#arm(entry);
    }
  }

  #scheduleRefill(delayMs = this.#o.refillIntervalMs): void {
    if (this.#stopped) return;
    this.#refillTimer = setTimeout(() => {
      const stopTimer = this.#o.metrics?.refillDuration.startTimer();
      this.#refilling = this.refill()
        .then(() => void stopTimer?.())
        .catch((error: unknown) => this.#o.log.warn({ err: loggable(error) }, 'refill failed; trying again next interval'))
        .finally(() => {
          this.#refilling = undefined;
          const again = this.#refillAgain;
          this.#refillAgain = false;
          this.#scheduleRefill(again ? 0 : undefined);
        });
    }, delayMs);
    this.#refillTimer.unref();
  }
}
