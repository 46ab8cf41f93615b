/**
 * Arming: the one place that turns timer effects into timers (the lifecycle's EffectSink), and the
 * rule for which tasks get one: those due within the horizon the scheduler has covered (the refill
 * arms the rest) and, with SHARDING=on, in a shard this process owns (invariant 9), or created or
 * moved through this process (created-here.ts). A task read from the table is armed only if the
 * dispatcher does not have it right now: the read may have raced its run. A worker type's task
 * gets no timer: the pull hub watches when such tasks fall due (it reads the table itself), and is
 * told here of the ones this process writes (`handOver`), so the dispatcher never locks a task
 * only to hand it on.
 * See docs/architecture.md#arming-and-the-horizon.
 */
import { everything, type Ownership } from '../cluster/lease-keeper.js';
import { shardOf } from '../cluster/shards.js';
import type { EffectSink, TimerEffect } from '../lifecycle/effects.js';
import type { TimerEntry } from '../store/task-types.js';
import type { CreatedHere } from './created-here.js';
import type { DueQueue } from './due-queue.js';
import type { Timers } from './timers.js';

/** Where the tasks of worker types go instead of a timer (the pull hub). */
export interface UntimedTasks {
  /** Whether `type` is a worker type. */
  has(type: string): boolean;
  /** A task of worker type `type` falls due at `runAt` (written by this process). */
  due(type: string, runAt: number): void;
}

export class Arming implements EffectSink {
  /** Every pending task due up to here has a timer (or is with the dispatcher, or is a worker type's). */
  coveredUntil = Number.NEGATIVE_INFINITY;
  #stopped = false;
  #untimed: UntimedTasks | undefined;

  constructor(
    readonly timers: Timers,
    private readonly queue: DueQueue,
    private readonly ownership: Ownership = everything,
    /** SHARDING=on: tasks created here in shards others own, armed here too (created-here.ts). */
    private readonly createdHere?: { set: CreatedHere; now: () => number },
  ) {}

  /** From now on the tasks of worker types go to `untimed`, not to a timer (set once the pull hub is built). */
  handOver(untimed: UntimedTasks): void {
    this.#untimed = untimed;
  }

  apply(effects: readonly TimerEffect[]): void {
    for (const effect of effects) {
      if (effect.kind === 'disarm') this.timers.disarm(effect.id);
      else if (effect.type !== undefined && this.#untimed?.has(effect.type) === true) {
        this.timers.disarm(effect.id);
        if (!this.#stopped) this.#untimed.due(effect.type, effect.runAt);
      } else this.#armWritten(effect.id, effect.runAt, effect.priority, effect.created === true);
    }
  }

  /**
   * A task whose time was written by this process (created, or moved: reschedule, replace, retry, a
   * run's backoff): armed if within the horizon and in a shard this process owns, else not. A move
   * in a shard another process owns is armed here too: its owner keeps the timer of the old time
   * and would hear of the new one only at its reconcile (a later time its old timer finds and
   * re-arms; an earlier one it would miss). A create there is armed here only when due soon: the
   * owner's refill finds new rows by their ids.
   */
  #armWritten(id: number, runAt: number, priority: number | undefined, created: boolean): void {
    if (this.#stopped) return;
    const here = runAt <= this.coveredUntil && (this.ownership.owns(id) || this.#armedForOtherOwner(id, runAt, created));
    if (here) this.timers.arm(id, runAt, priority);
    else this.timers.disarm(id);
  }

  /** Whether a task of a shard another process owns is armed here too: a create due soon, or a move (created-here.ts). */
  #armedForOtherOwner(id: number, runAt: number, created: boolean): boolean {
    const here = this.createdHere;
    if (here === undefined) return false;
    return created ? here.set.add(id, runAt, here.now()) : here.set.keep(id, runAt, here.now());
  }

  /** A pending task read from the table. */
  armRead(entry: TimerEntry): void {
    if (entry.untimed === true) return; // a worker type's: the pull hub reads it itself
    if (!this.#stopped && this.ownership.owns(entry.id) && !this.queue.isBusy(entry.id))
      this.timers.arm(entry.id, entry.runAt, entry.priority);
  }

  /**
   * Disarms the tasks of shards this process no longer owns; answers how many. A shard given up to
   * another member is not armed anywhere until the new owner's next round takes it and loads its
   * tasks (a third of a lease later, at most a lease): its tasks due within `keepDueWithinMs` stay
   * armed here and claimable without the shard (created-here.ts, `keep`), so they run on time. Safe
   * as any claim of a shard not held: the claim is conditional on the row (invariant 9).
   */
  disarmShards(shards: Iterable<number>, keepDueWithinMs = 0): number {
    const lost = new Set(shards);
    const now = this.createdHere?.now() ?? 0;
    const keepUntil = this.createdHere === undefined || keepDueWithinMs <= 0 ? Number.NEGATIVE_INFINITY : now + keepDueWithinMs;
    let count = 0;
    for (const id of this.timers.ids()) {
      if (!lost.has(shardOf(id))) continue;
      const runAt = this.timers.runAtOf(id);
      if (!this.#stopped && runAt !== undefined && runAt <= keepUntil && this.createdHere!.set.keep(id, runAt, now)) continue;
      if (this.timers.disarm(id)) count++;
    }
    return count;
  }

  /** Arms nothing more and disarms every timer. */
  stop(): void {
    this.#stopped = true;
    this.timers.disarmAll();
  }
}
