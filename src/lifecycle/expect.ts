/**
 * Writes under a lock: a transition that locked its rows (the claim, a repair) writes them with
 * statements that still name the state they expect (invariant 13, docs/architecture.md#invariants), and expects every
 * row it locked to be written. A shortfall means the lock did not hold (an engine whose locking
 * reads do not lock, a cluster that certifies only at commit): the transaction must not commit,
 * and StateMoved rolls it back, a handler's writes with it. A write that holds no lock beforehand
 * (an outside run's result, a failure recorded after its transaction was lost) is not an error
 * when it finds the task moved on: it answers that it lost (run.ts, Settled).
 */
export class StateMoved extends Error {
  constructor(what: string, written: number, expected: number) {
    super(`${what}: ${written} of ${expected} locked tasks were still in the state expected; rolled back`);
  }
}

/** Throws StateMoved unless the write reached all `expected` rows. */
export function expectAll(what: string, written: number, expected: number): void {
  if (written !== expected) throw new StateMoved(what, written, expected);
}
