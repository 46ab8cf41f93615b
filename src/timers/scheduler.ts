/**
 * The scheduler decides which tasks have a timer: those due within HORIZON_MS (invariant 6: memory
 * follows the horizon, not the backlog). Boot: the repairs (with shards, only in the shards this
 * process owns or just acquired), then the pending tasks within the horizon, page by page. Refill,
 * every REFILL_INTERVAL_MS: what entered the horizon, ids above the last one seen, and the gaps
 * that scan jumped over (a late commit, id-gaps.ts). Reconcile, about every RECONCILE_INTERVAL_MS: the safety net.
 * See docs/architecture.md#arming-and-the-horizon (repairs: docs/architecture.md#the-lifecycle).
 */
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import { loggable } from '../db/errors.js';
import type { Lifecycle } from '../lifecycle/lifecycle.js';
import type { TaskStore } from '../store/task-store.js';
import type { RunAtCursor } from '../store/task-types.js';
import type { TimerEntry } from '../store/task-types.js';
import { IdGaps } from './id-gaps.js';
import type { Arming } from './arming.js';

export interface SchedulerOptions {
  store: TaskStore;
  lifecycle: Lifecycle;
  clock: Clock;
  log: Logger;
  arming: Arming;
  horizonMs: number;
  refillIntervalMs: number;
  reconcileIntervalMs: number;
  misfireGraceMs: number;
  metrics?: SchedulerMetrics;
  /**
   * With several instances: the shards this process owns right now (their tasks alone are read
   * and armed). Undefined: every task.
   */
  shards?: () => readonly number[] | undefined;
  /** Called after every reconcile (the database clock check hangs here); must not throw. */
  onReconcile?: () => void;
}

/** The refill's time and the lease recoveries the boot, the reconcile and a shard takeover make. */
export class SchedulerMetrics {
  readonly leaseRecoveries: Counter;
  readonly refillDuration: Histogram;

  constructor(registry: Registry) {
    this.leaseRecoveries = new Counter({
      name: 'punctual_lease_recoveries_total',
      help: 'Running tasks whose lease ran out (their process died) and were recovered. Should stay 0.',
      registers: [registry],
    });
    this.refillDuration = new Histogram({
      name: 'punctual_refill_duration_seconds',
      help: 'How long one refill (arming newly near and newly inserted tasks) took.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  }
}

const PAGE = 10_000;
/** Ids below the last one seen are watched this long for rows whose insert commits late. */
const LATE_WINDOW_MS = 60_000;
/** At most this many gaps are watched; past it the oldest leave early (the reconcile covers them). */
const MAX_GAPS = 10_000;
/** Gaps looked into by one statement. */
const GAPS_PER_READ = 1_000;

export class Scheduler {
  readonly #options: SchedulerOptions;
  /** The highest task id the id scan has seen. */
  #lastId = 0;
  /** The watch for late commits: the ids the scan jumped over (id-gaps.ts). */
  readonly #gaps = new IdGaps(LATE_WINDOW_MS, MAX_GAPS);
  #lastReconcile = 0;
  /**
   * A reconcile runs by this instant even if its interval has not passed: when the first run lease
   * a boot or a takeover found ends. A process killed mid-run leaves its tasks running under a
   * lease nobody renews; recovered at its end, not up to a reconcile interval later.
   */
  #reconcileBy = Number.POSITIVE_INFINITY;
  #booted = false;
  #stopped = false;
  #refillTimer: NodeJS.Timeout | undefined;
  #refilling: Promise<void> | undefined;
  /** A refill was asked for while one ran: run the next one at once. */
  #refillAgain = false;

  constructor(options: SchedulerOptions) {
    this.#options = options;
  }

  get booted(): boolean {
    return this.#booted;
  }

  get armed(): number {
    return this.#options.arming.timers.size;
  }

  async boot(): Promise<void> {
    const { store, lifecycle, arming, clock, log, horizonMs, misfireGraceMs } = this.#options;
    const started = clock.now();
    // Sharded, it owns no shard yet: the repairs wait for the shards it acquires (armShards).
    const shards = this.#options.shards?.();
    await this.#clearStrayFinishedAt();
    // Skip before recovering: a task that was mid-run when the process died did not misfire.
    const { skipped } = await lifecycle.skipMisfired(started - misfireGraceMs, shards);
    const leases = await lifecycle.recoverExpiredLeases(shards);
    this.#options.metrics?.leaseRecoveries.inc(leases.recovered + leases.failed);
    await this.#reconcileAtLeaseEnd(shards);
    // Read the id watermark first: rows inserted while the load runs are found by the id scan.
    this.#lastId = await store.reads.maxId();
    arming.coveredUntil = started + horizonMs;
    const armed = await this.#armDue(undefined, arming.coveredUntil);
    this.#lastReconcile = clock.now();
    this.#booted = true;
    log.info({ armed, recovered: leases.recovered, failedLeases: leases.failed, skipped, ms: clock.now() - started }, 'boot load armed');
    this.#scheduleRefill();
  }

  /** One refill (and, when due, a reconcile). Runs on its own timer; public for tests. */
  async refill(): Promise<void> {
    const { clock, horizonMs, reconcileIntervalMs } = this.#options;
    const now = clock.now();
    if (now - this.#lastReconcile >= reconcileIntervalMs || now > this.#reconcileBy) await this.reconcile();
    const { arming } = this.#options;
    const previous = arming.coveredUntil;
    const until = now + horizonMs;
    if (until > previous) {
      // Move the bound first: a task created meanwhile is armed by its effect, not lost between the two.
      arming.coveredUntil = until;
      try {
        await this.#armDue(previous, until);
      } catch (error) {
        arming.coveredUntil = previous;
        throw error;
      }
    }
    await this.#armInserted(now);
    await this.#armLateCommits(now);
  }

  /**
   * Open tasks written with a finished_at (by hand or a tool: punctual never writes one) are
   * invisible to the reads of open tasks, which range over finished_at IS NULL: clear it, at boot
   * and at every reconcile, so such a task is still armed and run (invariant 3).
   */
  async #clearStrayFinishedAt(): Promise<void> {
    const cleared = await this.#options.store.changes.clearStrayFinishedAt();
    if (cleared > 0)
      this.#options.log.warn({ tasks: cleared }, 'open tasks carried a finished_at, written outside punctual: cleared, so they run');
  }

  /** The safety net: recover expired leases and arm every pending task within the horizon (of the shards owned). */
  async reconcile(): Promise<void> {
    const { lifecycle, clock, log } = this.#options;
    const started = clock.now();
    const shards = this.#options.shards?.();
    const by = this.#reconcileBy;
    await this.#clearStrayFinishedAt();
    const leases = await lifecycle.recoverExpiredLeases(shards);
    // Done with the lease it was run early for (unless a takeover meanwhile asked for a later one).
    if (this.#reconcileBy === by && by < started) this.#reconcileBy = Number.POSITIVE_INFINITY;
    if (leases.recovered + leases.failed > 0) log.warn(leases, 'recovered tasks whose lease ran out');
    this.#options.metrics?.leaseRecoveries.inc(leases.recovered + leases.failed);
    const seen = await this.#armDue(undefined, this.#options.arming.coveredUntil, shards);
    this.#lastReconcile = started;
    this.#options.onReconcile?.();
    log.debug({ pending: seen, armed: this.armed, ms: clock.now() - started }, 'reconciled');
  }

  /**
   * Shards this process just acquired (SHARDING=on): what their last owner left is repaired (the
   * misfired tasks that asked to be skipped, the outside runs whose lease ran out), in those shards
   * only, then their pending tasks within the horizon armed. The recovered tasks are armed here,
   * by their new owner; another shard's rows are neither read for repair nor locked.
   */
  async armShards(shards: readonly number[]): Promise<void> {
    if (!this.#booted || this.#stopped || shards.length === 0) return;
    const { lifecycle, clock, log, misfireGraceMs } = this.#options;
    const started = clock.now();
    const { skipped } = await lifecycle.skipMisfired(started - misfireGraceMs, shards);
    const leases = await lifecycle.recoverExpiredLeases(shards);
    this.#options.metrics?.leaseRecoveries.inc(leases.recovered + leases.failed);
    await this.#reconcileAtLeaseEnd(shards);
    const armed = await this.#armDue(undefined, this.#options.arming.coveredUntil, shards);
    log.debug({ shards: shards.length, armed, skipped, recovered: leases.recovered, ms: clock.now() - started }, 'acquired shards armed');
  }

  /**
   * The running tasks of `shards` (all, unsharded) whose lease has not ended yet may be a dead
   * process's: a reconcile runs right after the first of those leases ends (the next refill).
   * A live owner renews its leases, and the reconcile then finds nothing to do.
   */
  async #reconcileAtLeaseEnd(shards: readonly number[] | undefined): Promise<void> {
    const end = await this.#options.store.reads.earliestLeaseEnd(shards);
    if (end !== undefined) this.#reconcileBy = Math.min(this.#reconcileBy, end);
  }

  /**
   * Hook for time/step-watch.ts: the wall clock stepped by `stepMs`. The bookkeeping kept in wall-clock
   * times keeps its age (a backward step must not hold the reconcile off for the step's length),
   * and a refill runs at once: after a forward step the horizon moves to the new time and what
   * came due is armed now. After a backward step what is armed stays armed; the horizon grows
   * again once the clock has caught up.
   */
  followClockStep(stepMs: number): void {
    this.#lastReconcile += stepMs;
    this.#gaps.shift(stepMs);
    this.refillSoon();
  }

  /**
   * The test clock moved: the safety net and a refill now (after the refill running), so what the
   * new time brought within the horizon is armed, and leases it ended are recovered, before this
   * resolves. Throws what they throw.
   */
  async followClock(): Promise<void> {
    if (this.#stopped || !this.#booted) return;
    while (this.#refilling !== undefined) await this.#refilling;
    const run = this.reconcile().then(() => this.refill());
    this.#refilling = run.then(
      () => undefined,
      () => undefined,
    );
    try {
      await run;
    } finally {
      this.#refilling = undefined;
    }
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
    this.#options.arming.stop();
  }

  /** Arms the pending tasks due in (from, until], page by page; returns how many were read. */
  async #armDue(from: number | undefined, until: number, shards = this.#options.shards?.()): Promise<number> {
    let cursor: RunAtCursor | undefined;
    let count = 0;
    if (shards !== undefined && shards.length === 0) return 0;
    for (;;) {
      const page = await this.#options.store.reads.pendingDueBetween(from, until, cursor, PAGE, shards);
      for (const entry of page) this.#options.arming.armRead(entry);
      count += page.length;
      const last = page[page.length - 1];
      if (page.length < PAGE || last === undefined || this.#stopped) return count;
      cursor = { runAt: last.runAt, id: last.id };
    }
  }

  /** Arms rows inserted since the last scan (straight into the table or through the API). */
  async #armInserted(now: number): Promise<void> {
    for (;;) {
      const rows = await this.#options.store.reads.insertedAfter(this.#lastId, PAGE);
      for (const row of rows) {
        this.#gaps.jumped(this.#lastId, row.id, now);
        this.#lastId = row.id;
        this.#armNew(row);
      }
      if (rows.length < PAGE) return;
    }
  }

  /** Finds rows that committed in the gaps the scan left, while they are watched, and arms the pending ones. */
  async #armLateCommits(now: number): Promise<void> {
    this.#gaps.age(now);
    const ranges = this.#gaps.ranges();
    for (let start = 0; start < ranges.length; start += GAPS_PER_READ) {
      const rows = await this.#options.store.reads.insertedIn(ranges.slice(start, start + GAPS_PER_READ));
      this.#gaps.filled(rows.map((row) => row.id));
      for (const row of rows) this.#armNew(row);
    }
  }

  /** A row the scans found: armed when it is pending, due within the horizon and not armed yet. */
  #armNew(row: TimerEntry & { pending: boolean }): void {
    const { arming } = this.#options;
    if (row.pending && row.runAt <= arming.coveredUntil && !arming.timers.has(row.id)) arming.armRead(row);
  }

  #scheduleRefill(delayMs = this.#options.refillIntervalMs): void {
    if (this.#stopped) return;
    this.#refillTimer = setTimeout(() => {
      if (this.#refilling !== undefined) return this.#scheduleRefill(); // the test clock's catch-up runs
      const stopTimer = this.#options.metrics?.refillDuration.startTimer();
      this.#refilling = this.refill()
        .then(() => void stopTimer?.())
        .catch((error: unknown) => this.#options.log.warn({ err: loggable(error) }, 'refill failed; trying again next interval'))
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
