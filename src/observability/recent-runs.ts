/**
 * The last hour of this process's runs, in 10 s slots, for the dashboard's charts: runs started by
 * outcome, how late they started (p50, p99: start − runAt − their wait, what punctual controls), and
 * apart from it how many waited for their type's pause or limits and how long (p50, p99). A fixed
 * ring of 360 slots, each a few counters and sparse histograms of lateness and wait in buckets 5 %
 * wide, so a quantile is at most 5 % high and memory does not grow with the runs. Each process
 * keeps its own ring.
 * See docs/architecture.md#recent-runs.
 */
/** Outcome of one run of a task. */
export type RunOutcome = 'done' | 'retry' | 'failed';

export const SLOT_MS = 10_000;
export const SLOTS = 360;

/** Lateness buckets: [0, 0.1 ms) is bucket 0, then each bucket is 5 % wider than the last. */
const SMALLEST_MS = 0.1;
const GROWTH = 1.05;
const LOG_GROWTH = Math.log(GROWTH);

function bucketOf(lateMs: number): number {
  return lateMs < SMALLEST_MS ? 0 : 1 + Math.floor(Math.log(lateMs / SMALLEST_MS) / LOG_GROWTH);
}

/** The upper bound of a bucket: what a quantile that falls in it reports. */
function upperBound(bucket: number): number {
  return SMALLEST_MS * GROWTH ** bucket;
}

interface Slot {
  /** Epoch ms at which the slot starts (a multiple of SLOT_MS). */
  start: number;
  done: number;
  retry: number;
  failed: number;
  maxLateMs: number;
  lateness: Map<number, number>;
  /** Runs that waited for their type, their longest wait, and their waits' histogram. */
  waited: number;
  maxWaitMs: number;
  waits: Map<number, number>;
}

/** The ring, oldest slot first; one entry per slot, `null` where nothing ran. */
export interface RecentRunsSnapshot {
  slotMs: number;
  /** Start of each slot, epoch ms. */
  starts: number[];
  done: number[];
  retries: number[];
  failures: number[];
  latenessP50Ms: (number | null)[];
  latenessP99Ms: (number | null)[];
  /** Runs that waited for their type's pause or limits before they started. */
  waited: number[];
  /** How long those waited; null where none did. */
  waitedP50Ms: (number | null)[];
  waitedP99Ms: (number | null)[];
}

export class RecentRuns {
  readonly #slots: (Slot | undefined)[] = new Array<Slot | undefined>(SLOTS);

  /** One run that started at `startedAt` (epoch ms), `lateMs` late (its wait left out), after waiting `waitedMs` for its type. */
  record(outcome: RunOutcome, lateMs: number, startedAt: number, waitedMs = 0): void {
    const start = Math.floor(startedAt / SLOT_MS) * SLOT_MS;
    const index = (start / SLOT_MS) % SLOTS;
    let slot = this.#slots[index];
    if (slot === undefined || slot.start < start) {
      slot = { start, done: 0, retry: 0, failed: 0, maxLateMs: 0, lateness: new Map(), waited: 0, maxWaitMs: 0, waits: new Map() };
      this.#slots[index] = slot;
    } else if (slot.start > start) {
      return; // older than the ring reaches
    }
    slot[outcome]++;
    const late = Math.max(0, lateMs);
    slot.maxLateMs = Math.max(slot.maxLateMs, late);
    const bucket = bucketOf(late);
    slot.lateness.set(bucket, (slot.lateness.get(bucket) ?? 0) + 1);
    if (waitedMs > 0) {
      slot.waited++;
      slot.maxWaitMs = Math.max(slot.maxWaitMs, waitedMs);
      const waitBucket = bucketOf(waitedMs);
      slot.waits.set(waitBucket, (slot.waits.get(waitBucket) ?? 0) + 1);
    }
  }

  /** The SLOTS slots that end with the one holding `now`. */
  snapshot(now: number): RecentRunsSnapshot {
    const last = Math.floor(now / SLOT_MS) * SLOT_MS;
    const out: RecentRunsSnapshot = {
      slotMs: SLOT_MS,
      starts: [],
      done: [],
      retries: [],
      failures: [],
      latenessP50Ms: [],
      latenessP99Ms: [],
      waited: [],
      waitedP50Ms: [],
      waitedP99Ms: [],
    };
    for (let i = SLOTS - 1; i >= 0; i--) {
      const start = last - i * SLOT_MS;
      const slot = this.#slots[(start / SLOT_MS) % SLOTS];
      const live = slot !== undefined && slot.start === start ? slot : undefined;
      out.starts.push(start);
      out.done.push(live?.done ?? 0);
      out.retries.push(live?.retry ?? 0);
      out.failures.push(live?.failed ?? 0);
      const runs = live === undefined ? 0 : live.done + live.retry + live.failed;
      out.latenessP50Ms.push(live === undefined ? null : quantile(live.lateness, runs, live.maxLateMs, 0.5));
      out.latenessP99Ms.push(live === undefined ? null : quantile(live.lateness, runs, live.maxLateMs, 0.99));
      const waited = live?.waited ?? 0;
      out.waited.push(waited);
      out.waitedP50Ms.push(waited === 0 ? null : quantile(live!.waits, waited, live!.maxWaitMs, 0.5));
      out.waitedP99Ms.push(waited === 0 ? null : quantile(live!.waits, waited, live!.maxWaitMs, 0.99));
    }
    return out;
  }
}

/** The nearest-rank quantile of a slot's histogram of `total` values at most `maxMs`, rounded to 0.1 ms. */
function quantile(histogram: Map<number, number>, total: number, maxMs: number, q: number): number {
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const bucket of [...histogram.keys()].sort((a, b) => a - b)) {
    seen += histogram.get(bucket)!;
    if (seen >= rank) return Math.round(Math.min(upperBound(bucket), maxMs) * 10) / 10;
  }
  return Math.round(maxMs * 10) / 10;
}
