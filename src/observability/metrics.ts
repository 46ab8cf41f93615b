/**
 * Prometheus metrics: what an operator watches (the backlog, how late tasks run, how long
 * handlers take, how often crash recovery steps in) plus Node's own process metrics.
 * One registry per service, so two services in one process (tests) do not mix their numbers.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { STEP_THRESHOLD_MS } from '../time/step-watch.js';
import { RecentRuns } from './recent-runs.js';
import type { TypeState } from '../dispatch/limits.js';

/** Seconds, from 1 ms to 60 s. */
const LATENESS_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const DURATION_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Outcome of one run of a task. */
export type RunOutcome = 'done' | 'retry' | 'failed';

export interface MetricSources {
  armed: () => number;
  pool: () => { inUse: number; waiting: number; total: number };
  /** Pending tasks per type; called at most every PENDING_REFRESH_MS. */
  pendingByType: () => Promise<Map<string, number>>;
  /** Pending tasks due more than OVERDUE_AFTER_MS before `now`; called at most every PENDING_REFRESH_MS. */
  overdue: (now: number) => Promise<number>;
  /** What /readyz answers: booted and the database answers. */
  ready: () => Promise<boolean>;
  /** Each type's pause and this process's runs and waiting tasks (dispatch/limits.ts). */
  types: () => Map<string, TypeState>;
}

/** A task this late and still pending is overdue (a healthy service starts it within milliseconds). */
export const OVERDUE_AFTER_MS = 1000;

/** Counting the backlog reads an index range: at most this often. */
const PENDING_REFRESH_MS = 15_000;

export class Metrics {
  readonly registry = new Registry();
  /** The last hour of runs in 10 s slots, for the dashboard's charts. */
  readonly recent = new RecentRuns();

  readonly runs = new Counter({
    name: 'punctual_task_runs_total',
    help: 'Task runs by type and outcome (done, retry: failed and will run again, failed: for good).',
    labelNames: ['type', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly lateness = new Histogram({
    name: 'punctual_task_lateness_seconds',
    help: 'How late a run started: run start − runAt.',
    labelNames: ['type'] as const,
    buckets: LATENESS_BUCKETS,
    registers: [this.registry],
  });

  readonly duration = new Histogram({
    name: 'punctual_handler_duration_seconds',
    help: 'How long a handler ran (for a batch, its time divided among its tasks).',
    labelNames: ['type'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });

  readonly retries = new Counter({
    name: 'punctual_task_retries_total',
    help: 'Failed runs that will be tried again.',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });

  readonly dispatchDbFailures = new Counter({
    name: 'punctual_dispatch_db_failures_total',
    help: 'Database failures met while running a batch (a cut connection, a deadlock, a lock wait timeout): its tasks were put back on their timers and tried again, without using an attempt.',
    registers: [this.registry],
  });

  readonly leaseRecoveries = new Counter({
    name: 'punctual_lease_recoveries_total',
    help: 'Running tasks whose lease ran out (their process died) and were recovered. Should stay 0.',
    registers: [this.registry],
  });

  readonly refillDuration = new Histogram({
    name: 'punctual_refill_duration_seconds',
    help: 'How long one refill (arming newly near and newly inserted tasks) took.',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly clockSteps = new Counter({
    name: 'punctual_clock_steps_total',
    help: `Steps of the wall clock noticed (its progress differed from the monotonic clock's by more than ${STEP_THRESHOLD_MS} ms); each re-armed the timers.`,
    registers: [this.registry],
  });

  readonly lateWakeups = new Counter({
    name: 'punctual_clock_late_wakeups_total',
    help: 'Times the process woke up late (it was frozen or its event loop blocked) and refilled at once.',
    registers: [this.registry],
  });

  readonly clockLastStep = new Gauge({
    name: 'punctual_clock_last_step_seconds',
    help: 'Size of the last wall-clock step: positive forward, negative backward (0 before any).',
    registers: [this.registry],
  });

  readonly shardsOwned = new Gauge({
    name: 'punctual_shards_owned',
    help: 'Shards (of 256) whose lease this process holds (SHARDING=on; 0 otherwise).',
    registers: [this.registry],
  });

  readonly members = new Gauge({
    name: 'punctual_members',
    help: 'Live processes sharing the tasks, as the last lease renewal saw them (SHARDING=on; 0 otherwise).',
    registers: [this.registry],
  });

  readonly leaseRenewals = new Counter({
    name: 'punctual_lease_renewals_total',
    help: 'Shard lease renewal rounds that succeeded.',
    registers: [this.registry],
  });

  readonly leaseLosses = new Counter({
    name: 'punctual_lease_losses_total',
    help: 'Shards lost without giving them up: a lease not renewed in time (pause, cut network) or taken by another process.',
    registers: [this.registry],
  });

  readonly shardHandovers = new Counter({
    name: 'punctual_shard_handovers_total',
    help: 'Shards this process acquired or gave up (joins, leaves, failovers).',
    registers: [this.registry],
  });

  readonly emptyClaims = new Counter({
    name: 'punctual_empty_claims_total',
    help: 'Claims that locked none of their fired tasks (another process ran them, or they were changed meanwhile).',
    registers: [this.registry],
  });

  readonly fencedClaims = new Counter({
    name: 'punctual_fenced_claims_total',
    help: 'Fired tasks not claimed because this process could not prove it holds their shard.',
    registers: [this.registry],
  });

  constructor(sources: MetricSources) {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 5 });
    new Gauge({
      name: 'punctual_armed_timers',
      help: 'Tasks with a timer in this process (those due within the horizon).',
      registers: [this.registry],
      collect() {
        this.set(sources.armed());
      },
    });
    const pool = (field: 'inUse' | 'waiting' | 'total') =>
      function (this: Gauge) {
        this.set(sources.pool()[field]);
      };
    new Gauge({
      name: 'punctual_db_pool_in_use',
      help: 'Database connections checked out.',
      registers: [this.registry],
      collect: pool('inUse'),
    });
    new Gauge({
      name: 'punctual_db_pool_waiting',
      help: 'Callers waiting for a database connection.',
      registers: [this.registry],
      collect: pool('waiting'),
    });
    new Gauge({ name: 'punctual_db_pool_open', help: 'Database connections open.', registers: [this.registry], collect: pool('total') });

    let counted: { at: number; byType: Map<string, number> } | undefined;
    new Gauge({
      name: 'punctual_pending_tasks',
      help: `Pending tasks by type, in the whole table (counted at most every ${PENDING_REFRESH_MS / 1000} s).`,
      labelNames: ['type'] as const,
      registers: [this.registry],
      async collect() {
        if (counted === undefined || Date.now() - counted.at > PENDING_REFRESH_MS) {
          try {
            counted = { at: Date.now(), byType: await sources.pendingByType() };
          } catch {
            return; // the database is away: keep the last count
          }
        }
        this.reset();
        for (const [type, count] of counted.byType) this.set({ type }, count);
      },
    });

    let overdue: { at: number; count: number } | undefined;
    new Gauge({
      name: 'punctual_overdue_tasks',
      help: `Pending tasks due more than ${OVERDUE_AFTER_MS / 1000} s ago, in the whole table (counted at most every ${PENDING_REFRESH_MS / 1000} s). Should stay near 0.`,
      registers: [this.registry],
      async collect() {
        const now = Date.now();
        if (overdue === undefined || now - overdue.at > PENDING_REFRESH_MS) {
          try {
            overdue = { at: now, count: await sources.overdue(now - OVERDUE_AFTER_MS) };
          } catch {
            return; // the database is away: keep the last count
          }
        }
        this.set(overdue.count);
      },
    });
    const typeGauge = (name: string, help: string, value: (state: TypeState) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['type'] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [type, state] of sources.types()) this.set({ type }, value(state));
        },
      });
    typeGauge('punctual_type_paused', '1 when the type is paused (its due tasks wait, none starts), else 0.', (state) =>
      state.control?.paused ? 1 : 0,
    );
    typeGauge(
      'punctual_type_running',
      'Runs of the type in this process now (its concurrency limit counts these).',
      (state) => state.running,
    );
    typeGauge(
      'punctual_type_waiting',
      'Due tasks of the type held back in this process by its pause or its limits (pending, no attempt used).',
      (state) => state.waiting,
    );
    new Gauge({
      name: 'punctual_ready',
      help: '1 when this process is ready (booted, and the database answers), as /readyz says; else 0.',
      registers: [this.registry],
      async collect() {
        this.set((await sources.ready().catch(() => false)) ? 1 : 0);
      },
    });
  }

  /** Records one run that started at `startedAt` for a task due at `runAt`. */
  recordRun(type: string, outcome: RunOutcome, runAt: number, startedAt: number, durationMs: number): void {
    this.runs.inc({ type, outcome });
    this.lateness.observe({ type }, Math.max(0, startedAt - runAt) / 1000);
    this.duration.observe({ type }, durationMs / 1000);
    if (outcome === 'retry') this.retries.inc({ type });
    this.recent.record(outcome, startedAt - runAt, startedAt);
  }
}
