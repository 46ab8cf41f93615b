/**
 * The due tasks per type that GET /types shows, as a read model like the summary's: counting
 * costs a walk over the index, and a dashboard or a dozen clients polling /types must not turn
 * that into a load on the database that slows the intake. So one reading is kept a few seconds
 * and shared by the requests meanwhile (a failed reading is not kept), and each type's count
 * stops at DUE_COUNT_CAP: a paused type with a million due tasks costs what ten thousand do.
 */
import { DUE_COUNT_CAP } from '../contract/limits.js';
import type { Clock } from '../time/clock.js';
import type { TypeControlStore } from './type-controls.js';

/** How long one reading of the due counts is served. */
export const TYPE_DUE_TTL_MS = 5000;

export class TypeDueReader {
  #cached: { at: number; types: string; value: Promise<Map<string, number>> } | undefined;

  constructor(
    private readonly store: Pick<TypeControlStore, 'countDueByType'>,
    private readonly clock: Clock,
  ) {}

  /** Drops the reading: the answer to a change of a type shows its counts as they are now. */
  forget(): void {
    this.#cached = undefined;
  }

  /** Each of `types`' due tasks, up to DUE_COUNT_CAP, as read at most TYPE_DUE_TTL_MS ago. */
  read(types: readonly string[]): Promise<Map<string, number>> {
    const now = this.clock.now();
    const key = types.join('\n');
    const cached = this.#cached;
    // A new type, a clock stepped back or an old reading: count again.
    if (cached === undefined || cached.types !== key || now - cached.at > TYPE_DUE_TTL_MS || now < cached.at) {
      const reading = { at: now, types: key, value: this.store.countDueByType(types, now, DUE_COUNT_CAP) };
      this.#cached = reading;
      reading.value.catch(() => {
        if (this.#cached === reading) this.#cached = undefined;
      });
      return reading.value;
    }
    return cached.value;
  }
}
