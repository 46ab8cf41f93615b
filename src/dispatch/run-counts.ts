/**
 * The runs admitted by the type limits and not finished yet, per group key (what maxConcurrency
 * counts) and per type (what the type routes and metrics show). A count that reaches zero is
 * dropped, so the maps hold only what runs now.
 */

export class RunCounts {
  readonly #byKey = new Map<string, number>();
  readonly #byType = new Map<string, number>();

  /** A run of `type`, in group `key`, was admitted. */
  start(type: string, key: string): void {
    add(this.#byKey, key, 1);
    add(this.#byType, type, 1);
  }

  /** A run admitted by `start` is over (finished, or never began). */
  finish(type: string, key: string): void {
    add(this.#byKey, key, -1);
    add(this.#byType, type, -1);
  }

  ofKey(key: string): number {
    return this.#byKey.get(key) ?? 0;
  }

  ofType(type: string): number {
    return this.#byType.get(type) ?? 0;
  }

  /** The types with runs now. */
  types(): IterableIterator<string> {
    return this.#byType.keys();
  }
}

function add(counts: Map<string, number>, key: string, delta: number): void {
  const value = (counts.get(key) ?? 0) + delta;
  if (value <= 0) counts.delete(key);
  else counts.set(key, value);
}
