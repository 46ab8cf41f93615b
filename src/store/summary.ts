/**
 * The backlog, the lateness and the waits at a glance (GET /tasks/summary). The counts read the whole table,
 * so one reading is kept a few seconds and shared by the requests meanwhile; a failed reading is
 * not kept. The armed count is this process's own and read each time.
 */
import type { Clock } from '../time/clock.js';
import type { TaskStore } from './task-store.js';
import { toIsoUtc } from '../time/zones.js';

/** How long one reading of the counts is served. */
export const SUMMARY_TTL_MS = 5000;
/** Completed tasks the lateness percentiles are taken over. */
const LATENESS_SAMPLE = 1000;

export interface SummaryReading {
  pending: number;
  running: number;
  failed: number;
  /** Over the latest LATENESS_SAMPLE done runs: start − runAt − waitedMs (what punctual controls). */
  latenessP50Ms: number | null;
  latenessP99Ms: number | null;
  /** Among those runs, how many waited for their type's pause or limits, and how long (p50, p99). */
  waitedRuns: number;
  waitedP50Ms: number | null;
  waitedP99Ms: number | null;
  countedAt: string;
  armed: number;
}

export class SummaryReader {
  #cached: { at: number; value: Promise<Omit<SummaryReading, 'armed'>> } | undefined;

  constructor(
    private readonly store: TaskStore,
    private readonly clock: Clock,
    private readonly armed: () => number,
  ) {}

  async read(): Promise<SummaryReading> {
    const now = this.clock.now();
    if (this.#cached === undefined || now - this.#cached.at > SUMMARY_TTL_MS) {
      const value = Promise.all([this.store.reads.countOpen(), this.store.reads.recentLateness(LATENESS_SAMPLE)]).then(
        ([counts, { lateness, waits }]) => ({
          ...counts,
          latenessP50Ms: quantile(lateness, 0.5),
          latenessP99Ms: quantile(lateness, 0.99),
          waitedRuns: waits.length,
          waitedP50Ms: quantile(waits, 0.5),
          waitedP99Ms: quantile(waits, 0.99),
          countedAt: toIsoUtc(now),
        }),
      );
      const cached = { at: now, value };
      this.#cached = cached;
      value.catch(() => {
        if (this.#cached === cached) this.#cached = undefined;
      });
    }
    return { ...(await this.#cached.value), armed: this.armed() };
  }
}

/** The `q` quantile of the sorted `values`, or null without any. */
function quantile(values: readonly number[], q: number): number | null {
  return values.length === 0 ? null : values[Math.floor((values.length - 1) * q)]!;
}
