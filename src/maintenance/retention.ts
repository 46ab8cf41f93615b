/**
 * Retention: every RETENTION_INTERVAL_MS a sweep deletes done, cancelled and skipped tasks after
 * RETENTION_MS and failed ones after FAILED_RETENTION_MS, RETENTION_BATCH_SIZE ids at a time by
 * primary key, with a pause between batches that stop() ends at once. Every process sweeps (the
 * DELETE checks status and age again); the first sweep waits half an interval to one.
 * See docs/architecture.md#retention.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import type { TaskStore } from '../store/task-store.js';
import type { FinishedStatus } from '../store/task-types.js';
import type { AuditStore } from '../store/audit.js';

export interface RetentionOptions {
  store: TaskStore;
  /** The audit trail, whose entries are deleted after `auditRetentionMs`. */
  audit?: AuditStore;
  clock: Clock;
  log: Logger;
  registry: Registry;
  /** done, cancelled and skipped are deleted this long after they finished; 0 keeps them. */
  retentionMs: number;
  /** failed are deleted this long after they failed; 0 keeps them. */
  failedRetentionMs: number;
  /** Audit entries are deleted this long after they were written; 0 (or none) keeps them. */
  auditRetentionMs?: number;
  intervalMs: number;
  batchSize: number;
  pauseMs: number;
}

export interface SweepResult {
  deleted: Record<FinishedStatus, number>;
  /** Audit entries deleted. */
  audit: number;
  /** DELETE statements run on tasks. */
  batches: number;
  /** True when stop() ended the sweep before it was through. */
  stopped: boolean;
}

export class Retention {
  readonly #options: RetentionOptions;
  readonly #deleted: Counter<'status'>;
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #sweeping: Promise<SweepResult> | undefined;

  constructor(options: RetentionOptions) {
    this.#options = options;
    this.#deleted = new Counter({
      name: 'punctual_retention_deleted_total',
      help: 'Finished tasks deleted by the retention sweep, by status.',
      labelNames: ['status'] as const,
      registers: [options.registry],
    });
  }

  /** Starts the periodic sweep. */
  start(): void {
    if (this.#loop !== undefined || this.#abort.signal.aborted) return;
    this.#loop = this.#run();
  }

  /** Ends the periodic sweep and any sweep in progress. Safe to call twice. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
    await this.#sweeping?.catch(() => undefined);
  }

  /** One sweep, now (public for tests). A sweep already running is joined, not doubled. */
  sweep(): Promise<SweepResult> {
    this.#sweeping ??= this.#sweep().finally(() => {
      this.#sweeping = undefined;
    });
    return this.#sweeping;
  }

  async #run(): Promise<void> {
    const { intervalMs, log } = this.#options;
    // Not at boot (a restart loop would sweep on every start), and spread across processes.
    let wait = Math.floor(intervalMs / 2 + (Math.random() * intervalMs) / 2);
    while (await this.#pause(wait)) {
      try {
        const result = await this.sweep();
        const total = Object.values(result.deleted).reduce((a, b) => a + b, 0);
        if (total > 0) log.info({ ...result.deleted, batches: result.batches }, 'retention: deleted finished tasks');
      } catch (error) {
        log.warn({ err: error }, 'retention: sweep failed; it runs again next interval');
      }
      wait = intervalMs;
    }
  }

  /** Sleeps `ms`; false when stop() came first. */
  async #pause(ms: number): Promise<boolean> {
    if (this.#abort.signal.aborted) return false;
    try {
      await delay(ms, undefined, { signal: this.#abort.signal, ref: false });
      return true;
    } catch {
      return false;
    }
  }

  async #sweep(): Promise<SweepResult> {
    const { store, clock, retentionMs, failedRetentionMs, batchSize, pauseMs } = this.#options;
    const result: SweepResult = { deleted: { done: 0, cancelled: 0, skipped: 0, failed: 0 }, audit: 0, batches: 0, stopped: false };
    const now = clock.now();
    const plan: [FinishedStatus, number][] = [
      ['done', retentionMs],
      ['cancelled', retentionMs],
      ['skipped', retentionMs],
      ['failed', failedRetentionMs],
    ];
    for (const [status, keepMs] of plan) {
      if (keepMs === 0) continue;
      const before = now - keepMs;
      for (;;) {
        if (this.#abort.signal.aborted) return { ...result, stopped: true };
        const ids = await store.changes.expiredIds(status, before, batchSize);
        if (ids.length === 0) break;
        const deleted = await store.changes.deleteExpired(ids, status, before);
        result.batches++;
        result.deleted[status] += deleted;
        this.#deleted.inc({ status }, deleted);
        if (ids.length < batchSize) break;
        if (!(await this.#pause(pauseMs))) return { ...result, stopped: true };
      }
    }
    const { audit, auditRetentionMs = 0 } = this.#options;
    if (audit === undefined || auditRetentionMs === 0) return result;
    for (;;) {
      if (this.#abort.signal.aborted) return { ...result, stopped: true };
      const deleted = await audit.deleteBefore(now - auditRetentionMs, batchSize);
      result.audit += deleted;
      if (deleted < batchSize) break;
      if (!(await this.#pause(pauseMs))) return { ...result, stopped: true };
    }
    return result;
  }
}
