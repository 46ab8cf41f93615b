/**
 * The ids the refill's id scan skipped: where a row may still appear because its insert commits
 * after rows with higher ids (a long transaction, interleaved auto-increment). The scan reads ids
 * above the last one seen; what it jumped over is kept here as ranges, each with the time it was
 * seen, and the refill looks into them until they are older than the watch. A range a row was
 * deleted from never enters; a range with no row in it costs one look into the primary key, so
 * the check is as cheap with a million ids seen as with ten (counting the ids seen was not: every
 * refill read the whole watch once any id was missing from it).
 */
export interface IdGap {
  /** The first and last missing id, inclusive. */
  from: number;
  to: number;
  /** When the scan jumped over it (wall-clock ms). */
  seenAt: number;
}

export class IdGaps {
  /** Ascending by id, and so by seenAt: the scan only moves up. */
  #gaps: IdGap[] = [];

  constructor(
    /** How long a gap is watched. */
    private readonly watchMs: number,
    /** At most this many are kept; past it the oldest leave early (the reconcile covers them). */
    private readonly maxGaps: number,
  ) {}

  get size(): number {
    return this.#gaps.length;
  }

  /** The scan went from `previous` straight to `next`: the ids between them are a gap. */
  jumped(previous: number, next: number, at: number): void {
    if (next > previous + 1) this.#gaps.push({ from: previous + 1, to: next - 1, seenAt: at });
  }

  /** Drops the gaps watched long enough, and the oldest past `maxGaps`. */
  age(now: number): void {
    let drop = 0;
    while (drop < this.#gaps.length && now - this.#gaps[drop]!.seenAt > this.watchMs) drop++;
    drop = Math.max(drop, this.#gaps.length - this.maxGaps);
    if (drop > 0) this.#gaps = this.#gaps.slice(drop);
  }

  /** The gaps as inclusive [from, to] ranges, ascending. */
  ranges(): [number, number][] {
    return this.#gaps.map((gap) => [gap.from, gap.to]);
  }

  /** Rows with these ids were found: they are gaps no more. */
  filled(ids: readonly number[]): void {
    if (ids.length === 0) return;
    const found = [...ids].sort((a, b) => a - b);
    const kept: IdGap[] = [];
    let i = 0;
    for (const gap of this.#gaps) {
      let from = gap.from;
      while (i < found.length && found[i]! < from) i++;
      while (i < found.length && found[i]! <= gap.to) {
        if (found[i]! > from) kept.push({ from, to: found[i]! - 1, seenAt: gap.seenAt });
        from = found[i]! + 1;
        i++;
      }
      if (from <= gap.to) kept.push({ from, to: gap.to, seenAt: gap.seenAt });
    }
    this.#gaps = kept;
  }

  /** The wall clock stepped: the gaps keep their age. */
  shift(stepMs: number): void {
    for (const gap of this.#gaps) gap.seenAt += stepMs;
  }
}
