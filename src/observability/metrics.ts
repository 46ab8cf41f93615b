/**
 * The Prometheus registry: one per service, so two services in one process (tests) do not mix
 * their numbers, holding Node's own process metrics (event loop, heap, CPU, handles).
 *
 * Nothing here knows the parts: each module registers what it measures on this registry itself
 * (the dispatch outcomes their run counters, the scheduler its refill, the pool its gauges, …),
 * so a new metric is written beside the code it measures and no central file imports them all.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();

  constructor() {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 5 });
  }
}
