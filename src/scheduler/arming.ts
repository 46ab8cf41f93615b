/**
 * Arming: the one place that turns timer effects into timers (the lifecycle's EffectSink), and
 * the rule for which tasks get one: those due within the horizon the scheduler has covered. A
 * task beyond it is left to the refill, which arms it when it comes near.
 *
 * A task read from the table (boot load, refill) is armed only if the dispatcher does not have it
 * right now: the read may have raced its run. A shard owner check will go here too: arm only what
 * this process owns.
 */
import type { EffectSink, TimerEffect } from '../lifecycle/effects.js';
import type { TimerEntry } from '../store/task-store.js';
import type { DueQueue } from './due-queue.js';
import type { Timers } from './timers.js';

export class Arming implements EffectSink {
  /** Every pending task due up to here has a timer (or is with the dispatcher). */
  coveredUntil = Number.NEGATIVE_INFINITY;
  #stopped = false;

  constructor(
    readonly timers: Timers,
    private readonly queue: DueQueue,
  ) {}

  apply(effects: readonly TimerEffect[]): void {
    for (const effect of effects) {
      if (effect.kind === 'disarm') this.timers.disarm(effect.id);
      else this.#wish(effect.id, effect.runAt);
    }
  }

  /** A task whose time was written by this process: armed if within the horizon, else not. */
  #wish(id: number, runAt: number): void {
    if (this.#stopped) return;
    if (runAt <= this.coveredUntil) this.timers.arm(id, runAt);
    else this.timers.disarm(id);
  }

  /** A pending task read from the table. */
  armRead(entry: TimerEntry): void {
    if (!this.#stopped && !this.queue.isBusy(entry.id)) this.timers.arm(entry.id, entry.runAt);
  }

  /** Arms nothing more and disarms every timer. */
  stop(): void {
    this.#stopped = true;
    this.timers.disarmAll();
  }
}
