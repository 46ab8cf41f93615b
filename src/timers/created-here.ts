/**
 * On-time creates in a sharded fleet: a task created through a process that does not own its
 * shard would otherwise wait for the owner's next refill to be armed (hundreds of ms late). So
 * the process that created it arms it too, and both may try to claim it: the claim is
 * conditional on the row (pending, due, `FOR UPDATE SKIP LOCKED`; invariant 9: ownership is the
 * efficiency, the conditional claim the safety), so one of them runs it and the other's claim
 * finds nothing. This is the bounded set of such ids, with their runAt: a claim of one of them
 * needs no shard fence. An entry is kept until a little after its runAt (the run, or the owner's
 * timer, has taken it over by then); past MAX_ENTRIES a create is left to the owner alone.
 *
 * The same holds for a task moved through this process (rescheduled, replaced, retried, or given a
 * run's backoff) in a shard another owns: the owner keeps its timer of the old time and would learn
 * of an earlier one only at its reconcile, so the process that moved it arms it too, whatever its
 * new time within the horizon (`keep`).
 *
 * The same holds for the tasks of a shard this process gives up to another member (rebalancing as
 * members join and leave): until the new owner's next round takes the shard and arms its tasks,
 * no one else has them armed, so those due before then stay armed and claimable here (`keep`).
 * See docs/cluster.md#creates-through-any-process.
 */

/** How many such tasks one process holds at most. */
const MAX_ENTRIES = 10_000;
/** How long after its runAt an entry may still be claimed here. */
const KEEP_AFTER_MS = 10_000;
export class CreatedHere {
  readonly #runAt = new Map<number, number>();

  /**
   * `withinMs`: only tasks due this soon are armed where they were created (two refill
   * intervals): the owner's refill arms later ones in time, and they stay the owner's alone.
   */
  constructor(private readonly withinMs: number) {}

  /** Remembers `id` (due at `runAt`, created `now`); false when it is not due soon enough, or the set is full. */
  add(id: number, runAt: number, now: number): boolean {
    if (runAt > now + this.withinMs) return false;
    if (this.#runAt.size >= MAX_ENTRIES) this.#prune(now);
    if (this.#runAt.size >= MAX_ENTRIES) return false;
    this.#runAt.set(id, runAt);
    return true;
  }

  /**
   * Remembers `id` (due at `runAt`), moved through this process or of a shard it just gave up, armed
   * here until its owner has it; false when the set is full (the owner alone runs it then).
   */
  keep(id: number, runAt: number, now: number): boolean {
    if (this.#runAt.size >= MAX_ENTRIES) this.#prune(now);
    if (this.#runAt.size >= MAX_ENTRIES) return false;
    this.#runAt.set(id, runAt);
    return true;
  }

  /** Whether this process may claim `id` without holding its shard. */
  has(id: number, now: number): boolean {
    const runAt = this.#runAt.get(id);
    if (runAt === undefined) return false;
    if (runAt + KEEP_AFTER_MS >= now) return true;
    this.#runAt.delete(id);
    return false;
  }

  get size(): number {
    return this.#runAt.size;
  }

  #prune(now: number): void {
    for (const [id, runAt] of this.#runAt) if (runAt + KEEP_AFTER_MS < now) this.#runAt.delete(id);
  }
}
