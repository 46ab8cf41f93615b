/**
 * The sliding-window rate math of the type limits: at most R starts in any one-second window (a
 * sliding window of the start times, the stricter form of a token bucket: a full bucket would let
 * 2R through in one second). A rate under one per second spaces the starts 1/R seconds apart.
 *
 * Starts need not come in time order (two batches read their time before taking their turn), so
 * the windows after a start count too, not only the one ending at it. The functions are pure; the
 * start times per group key live in StartTimes.
 */

export const WINDOW_MS = 1000;

/** The span a refused start waits on: a second, or the gap between starts of a rate under one. */
function spanOf(rate: number): number {
  return Math.max(WINDOW_MS, WINDOW_MS / rate);
}

/** Where `value` goes in `sorted`, after the equal ones. */
export function sortedIndex(sorted: readonly number[], value: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (sorted[mid]! <= value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * Whether one more start at `now` keeps every one-second window [w, w + 1 s) at or under
 * `rate` starts. `starts` is sorted.
 */
export function fitsWindow(starts: readonly number[], now: number, rate: number): boolean {
  if (rate < 1) return fractionFits(starts, now, rate);
  const limit = Math.floor(rate);
  const near = starts.filter((at) => at > now - WINDOW_MS && at < now + WINDOW_MS);
  near.splice(sortedIndex(near, now), 0, now);
  // Windows that hold `now` start at `now` or at a start before it: count each one's starts.
  let end = 0;
  for (let i = 0; i < near.length && near[i]! <= now; i++) {
    if (end < i) end = i;
    while (end < near.length && near[end]! < near[i]! + WINDOW_MS) end++;
    if (end - i > limit) return false;
  }
  return true;
}

/** A rate under one per second: one start per 1/rate seconds. */
function fractionFits(starts: readonly number[], now: number, rate: number): boolean {
  const gap = WINDOW_MS / rate;
  return starts.every((at) => Math.abs(now - at) >= gap);
}

/**
 * How many more starts may begin at `now`: none when one more would not fit, else what the last
 * second leaves of the rate, at least one. More than that is harmless: the extra ones are refused
 * when they ask, and wait again.
 */
export function roomInWindow(starts: readonly number[], now: number, rate: number): number {
  if (!fitsWindow(starts, now, rate)) return 0;
  const recent = starts.filter((at) => at > now - WINDOW_MS).length;
  return Math.max(1, Math.floor(rate) - recent);
}

/** When a start refused at `now` may fit: once the oldest start of its span has left it. */
export function nextRoomAt(starts: readonly number[], now: number, rate: number): number {
  const span = spanOf(rate);
  const oldest = starts.find((at) => at > now - span);
  return oldest === undefined ? now + 1 : oldest + span + 1;
}

/** How many group keys StartTimes keeps at most: past it, the one that started least recently goes. */
export const MAX_GROUPS = 4096;

interface Group {
  /** Start times, sorted. */
  starts: number[];
  /** How long the starts matter (two spans of the group's rate), as of its latest record. */
  keepMs: number;
}

/**
 * The start times per group key, sorted, those too old to matter dropped. A group key is made
 * per distinct `groupBy` value, so the keys are unbounded in number: a group whose starts all
 * left their window is dropped (by a sweep at most once a window, not only when read again), and
 * past `maxGroups` the group that started least recently is dropped. A dropped group forgets its
 * starts: it could start up to its rate once more within the window, the price of a bounded map
 * under a flood of distinct values.
 */
export class StartTimes {
  readonly #groups = new Map<string, Group>();
  readonly #maxGroups: number;
  #sweptAt = Number.NEGATIVE_INFINITY;

  constructor(maxGroups = MAX_GROUPS) {
    this.#maxGroups = maxGroups;
  }

  /** The starts of `key` that still matter at `now` for `rate`: the last two spans' worth. */
  of(key: string, now: number, rate: number): readonly number[] {
    const group = this.#groups.get(key);
    if (group === undefined) return [];
    const { starts } = group;
    const keep = 2 * spanOf(rate);
    let old = 0;
    while (old < starts.length && starts[old]! <= now - keep) old++;
    if (old > 0) starts.splice(0, old);
    if (starts.length === 0) this.#groups.delete(key);
    return starts;
  }

  /** A start of `key` at `at`. */
  record(key: string, at: number, rate: number): void {
    this.#sweep(at);
    this.of(key, at, rate);
    let group = this.#groups.get(key);
    if (group === undefined) group = { starts: [], keepMs: 0 };
    // Re-inserted, so the map's order is the order of the latest starts: the first is the stalest.
    this.#groups.delete(key);
    this.#groups.set(key, group);
    group.keepMs = 2 * spanOf(rate);
    group.starts.splice(sortedIndex(group.starts, at), 0, at);
    while (this.#groups.size > this.#maxGroups) this.#groups.delete(this.#groups.keys().next().value!);
  }

  /** A start recorded at `at` that did not happen after all. */
  forget(key: string, at: number): void {
    const group = this.#groups.get(key);
    const index = group?.starts.indexOf(at) ?? -1;
    if (index < 0) return;
    group!.starts.splice(index, 1);
    if (group!.starts.length === 0) this.#groups.delete(key);
  }

  /** Keys with starts kept. */
  get size(): number {
    return this.#groups.size;
  }

  /** Drops the groups whose latest start left their window: once a window at most, so O(1) a record on average. */
  #sweep(now: number): void {
    if (now - this.#sweptAt < WINDOW_MS) return;
    this.#sweptAt = now;
    for (const [key, { starts, keepMs }] of this.#groups) {
      if (starts[starts.length - 1]! <= now - keepMs) this.#groups.delete(key);
    }
  }
}
