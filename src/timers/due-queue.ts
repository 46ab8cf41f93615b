/**
 * The dispatcher's queue: ids whose timers fired, in order, and the set of ids queued or running
 * in this process. A timer is not armed again for a busy id (the table read that would arm it
 * raced its run), and an id fired twice is queued once.
 *
 * Priority: one lane per priority value, taken highest first, each in the order its timers fired.
 * A task of priority 5 fired after 50,000 of priority 0 is taken before any of them that is still
 * waiting, so the payment-timeout closes of a sale's midnight do not wait behind its marketing wall.
 *
 * It stands between the timers (which push) and the dispatcher (which takes), so neither has to
 * know the other.
 */
import { Fifo } from '../util/async.js';

export class DueQueue {
  /** The lanes by priority, and the priorities that have one, highest first (a handful at most). */
  readonly #lanes = new Map<number, Fifo<number>>();
  #order: number[] = [];
  #length = 0;
  readonly #busy = new Set<number>();
  #closed = false;
  #onPush: () => void = () => undefined;

  /** The consumer: told after each push (it batches the pushes of a loop turn itself). */
  consume(onPush: () => void): void {
    this.#onPush = onPush;
  }

  /** A task's timer fired. */
  push(id: number, priority = 0): void {
    if (this.#closed || this.#busy.has(id)) return;
    this.#busy.add(id);
    this.#lane(priority).push(id);
    this.#length++;
    this.#onPush();
  }

  /**
   * Up to `count` ids, the highest priority first, then oldest first; they stay busy until
   * released. With `above`, only ids of a priority above it.
   */
  take(count: number, above = Number.NEGATIVE_INFINITY): number[] {
    if (this.#order.length === 1 && this.#order[0]! > above) {
      const taken = this.#lanes.get(this.#order[0]!)!.take(count);
      this.#length -= taken.length;
      return taken;
    }
    const taken: number[] = [];
    for (const priority of this.#order) {
      if (taken.length >= count || priority <= above) break;
      for (const id of this.#lanes.get(priority)!.take(count - taken.length)) taken.push(id);
    }
    this.#length -= taken.length;
    return taken;
  }

  get length(): number {
    return this.#length;
  }

  /** The highest priority that has an id waiting, or undefined when none waits. */
  get topPriority(): number | undefined {
    return this.#order.find((priority) => this.#lanes.get(priority)!.length > 0);
  }

  /** How many ids of a priority above `priority` wait. */
  waitingAbove(priority: number): number {
    let count = 0;
    for (const lane of this.#order) {
      if (lane <= priority) break;
      count += this.#lanes.get(lane)!.length;
    }
    return count;
  }

  #lane(priority: number): Fifo<number> {
    let lane = this.#lanes.get(priority);
    if (lane === undefined) {
      lane = new Fifo<number>();
      this.#lanes.set(priority, lane);
      this.#order = [...this.#lanes.keys()].sort((a, b) => b - a);
    }
    return lane;
  }

  isBusy(id: number): boolean {
    return this.#busy.has(id);
  }

  /** The ids are no longer with the dispatcher: a timer may be armed for them again. */
  release(ids: Iterable<number>): void {
    for (const id of ids) this.#busy.delete(id);
  }

  /** Takes no more ids (stopping). */
  close(): void {
    this.#closed = true;
  }
}
