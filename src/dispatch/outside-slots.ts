/**
 * The count of outside slots: at most CONCURRENCY outside calls at once, besides the batches. A
 * batch reserves a slot for each task it may lease before it knows how many of its tasks are
 * outside ones (a lease must not be taken without a slot to run it), and gives back the ones it
 * did not use when it ends; a leased call holds its slot until it finishes.
 */

export class OutsideSlots {
  #busy = 0;

  constructor(readonly capacity: number) {}

  /** Slots reserved by batches or held by calls. */
  get busy(): number {
    return this.#busy;
  }

  get free(): number {
    return Math.max(0, this.capacity - this.#busy);
  }

  /** Reserves up to `wanted` slots; answers how many it got (0 when none is free). */
  reserve(wanted: number): number {
    const got = Math.max(0, Math.min(this.free, wanted));
    this.#busy += got;
    return got;
  }

  /** Gives back `count` reserved slots: unused by a batch, or a call that finished. */
  giveBack(count: number): void {
    this.#busy = Math.max(0, this.#busy - count);
  }
}
