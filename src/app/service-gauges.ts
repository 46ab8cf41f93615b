/**
 * The gauges no one module can answer alone: the backlog in the whole table (pending tasks by
 * type, overdue tasks) and readiness as /readyz says it. The composition root registers them
 * with the sources it wires; every other metric is registered by the module that measures it.
 *
 * Counting the backlog reads an index range, so it is done at most every PENDING_REFRESH_MS
 * whatever the scrape rate, and a scrape while the database is away keeps the last count.
 */
import { Gauge, type Registry } from 'prom-client';

/** A task this late and still pending is overdue (a healthy service starts it within milliseconds). */
export const OVERDUE_AFTER_MS = 1000;

/** Counting the backlog reads an index range: at most this often. */
const PENDING_REFRESH_MS = 15_000;

export interface ServiceGaugeSources {
  /** Pending tasks per type; called at most every PENDING_REFRESH_MS. */
  pendingByType: () => Promise<Map<string, number>>;
  /** Pending tasks due before `before`; called at most every PENDING_REFRESH_MS. */
  overdue: (before: number) => Promise<number>;
  /** What /readyz answers: booted and the database answers. */
  ready: () => Promise<boolean>;
}

export function registerServiceGauges(registry: Registry, sources: ServiceGaugeSources): void {
  let counted: { at: number; byType: Map<string, number> } | undefined;
  new Gauge({
    name: 'punctual_pending_tasks',
    help: `Pending tasks by type, in the whole table (counted at most every ${PENDING_REFRESH_MS / 1000} s).`,
    labelNames: ['type'] as const,
    registers: [registry],
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
    registers: [registry],
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

  new Gauge({
    name: 'punctual_ready',
    help: '1 when this process is ready (booted, and the database answers), as /readyz says; else 0.',
    registers: [registry],
    async collect() {
      this.set((await sources.ready().catch(() => false)) ? 1 : 0);
    },
  });
}
