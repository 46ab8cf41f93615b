/**
 * The dispatcher's queue: ids whose timers fired, in order, and the set of ids queued or running
 * in this process. A timer is not armed again for a busy id (the table read that would arm it
 * raced its run), and an id fired twice is queued once.
 *
 * It stands between the timers (which push) and the dispatcher (which takes), so neither has to
 * know the other.
 */
import { Fifo } from '../util/async.js';

export class DueQueue {
  readonly #due = new Fifo<number>();
  readonly #busy = new Set<number>();
  #closed = false;
  #onPush: () => void = () => undefined;

  /** The consumer: told after each push (it batches the pushes of a loop turn itself). */
  consume(onPush: () => void): void {
    this.#onPush = onPush;
  }

  /** A task's timer fired. */
  push(id: number): void {
    if (this.#closed || this.#busy.has(id)) return;
    this.#busy.add(id);
    this.#due.push(id);
    this.#onPush();
  }

  /** Up to `count` ids, oldest first; they stay busy until released. */
  take(count: number): number[] {
    return this.#due.take(count);
  }

  get length(): number {
    return this.#due.length;
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
