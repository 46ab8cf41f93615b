/**
 * The Prometheus registry: one per service, so two services in one process (tests) do not mix
 * their numbers, holding Node's own process metrics (event loop, heap, CPU, handles).
 *
 * Nothing here knows the parts: each module registers what it measures on this registry itself
 * (the dispatch outcomes their run counters, the scheduler its refill, the pool its gauges, …),
 * so a new metric is written beside the code it measures and no central file imports them all.
 */
import { readFileSync } from 'node:fs';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';

/** punctual's version, from its package.json (two folders up, in src/ and in dist/ alike). */
export const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export class Metrics {
  readonly registry = new Registry();

  constructor() {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 5 });
    // Always 1: its labels say what runs, and the alerts find punctual's targets by it, whatever their job is named.
    new Gauge({
      name: 'punctual_build_info',
      help: 'Always 1; the labels say which punctual and which Node run this process.',
      labelNames: ['version', 'node'] as const,
      registers: [this.registry],
    }).set({ version: VERSION, node: process.version }, 1);
  }
}
