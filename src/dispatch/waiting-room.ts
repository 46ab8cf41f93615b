/**
 * The waiting room of the type limits: due tasks a pause or a limit holds back, pending in the
 * table with no attempt used, their ids still busy in the due queue. Fair: they leave in (runAt,
 * id) order. Bounded: at most `capacityPerType` per type; one turned away is left to the table,
 * where the reconcile finds it again. No payloads. It remembers which ids left it until the
 * dispatcher asks once, for the misfire rule.
 * See docs/architecture.md#type-controls-and-the-waiting-room.
 */

export type WaitReason = 'paused' | 'concurrency' | 'rate';

export interface Waiting {
  readonly id: number;
  readonly runAt: number;
  /** The task's group key under its type's limits. */
  readonly key: string;
  readonly reason: WaitReason;
}

/** Ten thousand per type: far above what a limit holds back in practice, a few MB at most. */
export const WAITING_PER_TYPE = 10_000;

export class WaitingRoom {
  readonly #byType = new Map<string, Map<number, Waiting>>();
  readonly #left = new Set<number>();

  constructor(readonly capacityPerType = WAITING_PER_TYPE) {}

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
    for (const { id } of leaving) {
      waiting.delete(id);
      this.#left.add(id);
    }
    if (waiting.size === 0) this.#byType.delete(type);
    return leaving;
  }

  /** Every waiting task of `type` leaves, in (runAt, id) order. */
  leaveAll(type: string): Waiting[] {
    return this.leave(type, () => true);
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
  }
}
