/**
 * The count of tasks in each status for a console's views (GET /tasks/counts, and the total of a
 * GET /tasks page). A count reads every index entry of what it counts (InnoDB keeps no counts),
 * so one reading per filter is kept COUNTS_TTL_MS and shared by the requests meanwhile: a
 * dashboard polling every 2 s, or ten of them, costs one count per filter per period. A failed
 * reading is not kept; at most MAX_FILTERS filters are held, the oldest dropped first.
 */
import type { Clock } from '../time/clock.js';
import type { TaskStore } from './task-store.js';
import type { ListFilters, Status } from './task-types.js';

export const COUNTS_TTL_MS = 1500;
const MAX_FILTERS = 64;

export interface CountsReading {
  counts: Record<Status, number>;
  at: number;
}

export class StatusCountsReader {
  readonly #cached = new Map<string, { at: number; value: Promise<CountsReading> }>();

  constructor(
    private readonly store: TaskStore,
    private readonly clock: Clock,
  ) {}

  read(filters: ListFilters): Promise<CountsReading> {
    const now = this.clock.now();
    const key = JSON.stringify([
      filters.type ?? null,
      filters.tag ?? null,
      filters.keyPrefix ?? null,
      filters.group ?? null,
      filters.series ?? null,
      filters.from ?? null,
      filters.until ?? null,
    ]);
    const held = this.#cached.get(key);
    if (held !== undefined && now - held.at <= COUNTS_TTL_MS) return held.value;
    const value = this.store.reads.countByStatus(filters).then((counts) => ({ counts, at: now }));
    const entry = { at: now, value };
    this.#cached.delete(key);
    this.#cached.set(key, entry);
    if (this.#cached.size > MAX_FILTERS) this.#cached.delete(this.#cached.keys().next().value!);
    value.catch(() => {
      if (this.#cached.get(key) === entry) this.#cached.delete(key);
    });
    return value;
  }
}
