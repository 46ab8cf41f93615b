/**
 * Group commit for callers that each want one thing done: items added in the same loop turn (and
 * while earlier batches are still running) are handed to `run` together, at most `maxBatch` at a
 * time and `maxRunning` batches at once. Each caller gets its own item's result or error.
 */
export type Outcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

export class Batcher<I, O> {
  #waiting: Waiting<I, O>[] = [];
  #running = 0;
  #scheduled = false;

  constructor(
    private readonly run: (items: I[]) => Promise<Outcome<O>[]>,
    private readonly maxBatch: number,
    private readonly maxRunning: number,
  ) {}

  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#waiting.push({ item, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    while (this.#running < this.maxRunning && this.#waiting.length > 0) {
      const batch = this.#waiting.splice(0, this.maxBatch);
      this.#running++;
      this.run(batch.map((waiting) => waiting.item))
        .then(
          (outcomes) =>
            batch.forEach((waiting, i) => {
              const outcome = outcomes[i];
              if (outcome?.ok) waiting.resolve(outcome.value);
              else waiting.reject(outcome === undefined ? new Error('no outcome for a batched item') : outcome.error);
            }),
          (error: unknown) => batch.forEach((waiting) => waiting.reject(error)),
        )
        .finally(() => {
          this.#running--;
          this.#flush();
        });
    }
  }
}
