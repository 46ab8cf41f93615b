/** Small pieces of async plumbing shared by the scheduler and the dispatcher. */

export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/** A promise that resolves after `ms`; the timer does not keep the process alive. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * `work`, or a TimeoutError after `ms` (calling `onTimeout` first). A late rejection of `work`
 * is swallowed: whoever timed it out has already moved on. `work` is adopted once: a lazy
 * thenable (a drizzle query runs on every then/catch) runs once.
 */
export function withTimeout<T>(work: PromiseLike<T>, ms: number, onTimeout?: () => void): Promise<T> {
  const promise = Promise.resolve(work);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new TimeoutError(`timed out after ${ms} ms`));
    }, ms);
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A first-in first-out queue with O(1) push and shift. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  /** Up to `count` items from the front. */
  take(count: number): T[] {
    const taken: T[] = [];
    while (taken.length < count && this.length > 0) taken.push(this.shift() as T);
    return taken;
  }

  get length(): number {
    return this.#items.length - this.#head;
  }
}
