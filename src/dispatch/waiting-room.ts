/**
 * The waiting room of the type limits: due tasks a pause or a limit holds back, pending in the
 * table with no attempt used, their ids still busy in the due queue. Fair: they leave in (runAt,
 * id) order. Bounded: at most `capacityPerType` per type; one turned away is left to the table,
 * where the reconcile finds it again. No payloads. It remembers which ids left it until the
 * dispatcher asks once, for the misfire rule, and how long each waited (every stay summed, by what
 * held it) until its run is admitted: that time is the run's wait, not its lateness.
 * See docs/architecture.md#type-controls-and-the-waiting-room.
 */

import type { Wait } from '../store/task-types.js';

export type WaitReason = 'paused' | 'concurrency' | 'rate';

export interface Waiting {
  readonly id: number;
  readonly runAt: number;
  /** The task's group key under its type's limits. */
  readonly key: string;
  readonly reason: WaitReason;
  /** When it came in (epoch ms). */
  readonly since: number;
}

/** A task's stays so far, in ms: for the pause, and for a limit. */
interface Stays {
  pause: number;
  limit: number;
}

/** The most a waiting room remembers stays of (ids whose run is never admitted here are dropped oldest first). */
const STAYS_KEPT = 100_000;

/** Ten thousand per type: far above what a limit holds back in practice, a few MB at most. */
export const WAITING_PER_TYPE = 10_000;

export class WaitingRoom {
  readonly #byType = new Map<string, Map<number, Waiting>>();
  readonly #left = new Set<number>();
  readonly #stays = new Map<number, Stays>();

  constructor(
    readonly capacityPerType = WAITING_PER_TYPE,
    private readonly now: () => number = Date.now,
  ) {}

  /** `entry` waits here; false when its type's room is full (it was not let in). */
  enter(type: string, entry: Waiting): boolean {
    let waiting = this.#byType.get(type);
    if (waiting?.has(entry.id) !== true && (waiting?.size ?? 0) >= this.capacityPerType) return false;
    if (waiting === undefined) this.#byType.set(type, (waiting = new Map<number, Waiting>()));
    waiting.set(entry.id, entry);
    return true;
  }

  /**
   * The waiting tasks of `type` in (runAt, id) order; those `lets` lets through leave the room and
   * are answered in that order. `lets` is asked once per task, in that order.
   */
  leave(type: string, lets: (entry: Waiting) => boolean): Waiting[] {
    const waiting = this.#byType.get(type);
    if (waiting === undefined) return [];
    const leaving = [...waiting.values()].sort((a, b) => a.runAt - b.runAt || a.id - b.id).filter((entry) => lets(entry));
    const now = this.now();
    for (const entry of leaving) {
      waiting.delete(entry.id);
      this.#left.add(entry.id);
      this.#stayed(entry, now);
    }
    if (waiting.size === 0) this.#byType.delete(type);
    return leaving;
  }

  /** Every waiting task of `type` leaves, in (runAt, id) order. */
  leaveAll(type: string): Waiting[] {
    return this.leave(type, () => true);
  }

  /** Adds `entry`'s stay until `now` to its task's stays. */
  #stayed(entry: Waiting, now: number): void {
    const stays = this.#stays.get(entry.id) ?? { pause: 0, limit: 0 };
    stays[entry.reason === 'paused' ? 'pause' : 'limit'] += Math.max(0, now - entry.since);
    this.#stays.delete(entry.id);
    this.#stays.set(entry.id, stays);
    if (this.#stays.size > STAYS_KEPT) this.#stays.delete(this.#stays.keys().next().value!);
  }

  /**
   * How long `id` waited here in all, and for what the longest; forgotten once asked (its run was
   * admitted). Undefined: it did not wait.
   */
  takeWait(id: number): Wait | undefined {
    const stays = this.#stays.get(id);
    if (stays === undefined) return undefined;
    this.#stays.delete(id);
    const ms = Math.round(stays.pause + stays.limit);
    return { ms, reason: stays.pause >= stays.limit ? 'pause' : 'limit' };
  }

  /** Gives back a wait `takeWait` answered whose run never began (its transaction rolled back). */
  giveBack(id: number, wait: Wait): void {
    const stays = this.#stays.get(id) ?? { pause: 0, limit: 0 };
    stays[wait.reason] += wait.ms;
    this.#stays.set(id, stays);
  }

  /** Whether `id` left the room since last asked (asked once, forgotten: also for ids done with otherwise). */
  hasWaited(id: number): boolean {
    return this.#left.delete(id);
  }

  sizeOf(type: string): number {
    return this.#byType.get(type)?.size ?? 0;
  }

  /** The types with tasks waiting. */
  types(): IterableIterator<string> {
    return this.#byType.keys();
  }

  /** Everyone leaves without being let through (stopping: they stay pending in the table). */
  clear(): void {
    this.#byType.clear();
    this.#stays.clear();
  }
}
