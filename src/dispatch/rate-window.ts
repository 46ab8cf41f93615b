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

/** The start times per group key, sorted, those too old to matter dropped as they are read. */
export class StartTimes {
  readonly #starts = new Map<string, number[]>();

  /** The starts of `key` that still matter at `now` for `rate`: the last two spans' worth. */
  of(key: string, now: number, rate: number): readonly number[] {
    const starts = this.#starts.get(key);
    if (starts === undefined) return [];
    const keep = 2 * spanOf(rate);
    let old = 0;
    while (old < starts.length && starts[old]! <= now - keep) old++;
    if (old > 0) starts.splice(0, old);
    if (starts.length === 0) this.#starts.delete(key);
    return starts;
  }

  /** A start of `key` at `at`. */
  record(key: string, at: number, rate: number): void {
    this.of(key, at, rate);
    let starts = this.#starts.get(key);
    if (starts === undefined) this.#starts.set(key, (starts = []));
    starts.splice(sortedIndex(starts, at), 0, at);
  }

  /** A start recorded at `at` that did not happen after all. */
  forget(key: string, at: number): void {
    const starts = this.#starts.get(key);
    const index = starts?.indexOf(at) ?? -1;
    if (index < 0) return;
    starts!.splice(index, 1);
    if (starts!.length === 0) this.#starts.delete(key);
  }

  /** Keys with starts kept. */
  get size(): number {
    return this.#starts.size;
  }
}
