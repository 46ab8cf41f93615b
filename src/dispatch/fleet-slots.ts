/**
 * The type limits for the whole fleet: before a locked task of a limited type may start, it takes
 * a slot in the database (store/limit-slots.ts), so maxConcurrency and ratePerSecond count every
 * process's runs, not one's. Per group key (limits.ts, keyOf): a run slot (maxConcurrency of them)
 * held until the run settles, or until its lease ends if the process died; and a rate slot
 * (ratePerSecond of them, at least one) held for one window: a slot is taken again only after its
 * window passed, so no one-second window holds more starts than the rate. A rate under one per
 * second: one slot, held 1/rate seconds. Only limited types come here; the others never pay the
 * round trip.
 */
import type { LimitSlotStore, SlotGroup } from '../store/limit-slots.js';
import type { TypeControl } from '../store/type-controls.js';
import { WINDOW_MS } from './rate-window.js';

/** What one admitted run holds in the database. */
export interface FleetGrant {
  readonly type: string;
  readonly digest: string;
  readonly holder: string;
  readonly run: number | undefined;
  readonly rate: number | undefined;
}

/** The sweep of long-unused rows runs at most this often. */
const SWEEP_EVERY_MS = 60_000;

export type SlotStore = Pick<LimitSlotStore, 'take' | 'free' | 'sweep'>;

export class FleetSlots {
  #takes = 0;
  #sweptAt = Date.now();

  constructor(
    private readonly store: SlotStore,
    /** This process's name: the prefix of every holder it writes. */
    private readonly owner: string,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {}

  /** Whether the type's runs take slots here. */
  static limits(control: TypeControl | undefined): boolean {
    return control !== undefined && (control.maxConcurrency !== null || control.ratePerSecond !== null);
  }

  /**
   * Up to `count` grants for runs of group `key` of a limited type, each lasting `leaseMs` at most
   * (a run slot) or its window (a rate slot): fewer when the fleet's slots are taken.
   */
  async take(key: string, control: TypeControl, count: number, leaseMs: number): Promise<FleetGrant[]> {
    const type = control.type;
    const digest = digestOf(key);
    const holder = `${this.owner}:${++this.#takes}`;
    const group = (kind: SlotGroup['kind']): SlotGroup => ({ type, digest, kind });
    let run: number[] = [];
    let rate: number[] = [];
    let want = count;
    try {
      if (control.maxConcurrency !== null) {
        run = await this.#takeUpTo(group('run'), control.maxConcurrency, want, holder, leaseMs);
        want = run.length;
      }
      if (control.ratePerSecond !== null && want > 0) {
        const rps = control.ratePerSecond;
        rate = await this.#takeUpTo(group('rate'), Math.max(1, Math.floor(rps)), want, holder, Math.max(WINDOW_MS, WINDOW_MS / rps));
        if (rate.length < run.length) await this.store.free(group('run'), run.splice(rate.length), holder);
        want = rate.length;
      }
    } catch (error) {
      // Whatever was taken before the error goes back (or else at its lease's end).
      await this.store.free(group('run'), run, holder).catch(() => undefined);
      await this.store.free(group('rate'), rate, holder).catch(() => undefined);
      throw error;
    }
    this.#sweepNow();
    return Array.from({ length: want }, (_, i) => ({ type, digest, holder, run: run[i], rate: rate[i] }));
  }

  /** The run ended: its run slot frees (its rate slot stays held for its window). */
  async release(grant: FleetGrant): Promise<void> {
    if (grant.run !== undefined) await this.#free(grant, 'run', grant.run);
  }

  /** The run never began: both its slots free. */
  async rollBack(grant: FleetGrant): Promise<void> {
    await this.release(grant);
    if (grant.rate !== undefined) await this.#free(grant, 'rate', grant.rate);
  }

  async #free(grant: FleetGrant, kind: SlotGroup['kind'], slot: number): Promise<void> {
    // Not freed (the database is away): the slot comes back at its lease's end.
    await this.store.free({ type: grant.type, digest: grant.digest, kind }, [slot], grant.holder).catch(this.onError);
  }

  /** Exactly `want` at most: a take tried again after an error may have got more, which go back. */
  async #takeUpTo(group: SlotGroup, size: number, want: number, holder: string, leaseMs: number): Promise<number[]> {
    const got = await this.store.take(group, size, want, holder, leaseMs);
    if (got.length > want) await this.store.free(group, got.splice(want), holder);
    return got;
  }

  #sweepNow(): void {
    if (Date.now() - this.#sweptAt < SWEEP_EVERY_MS) return;
    this.#sweptAt = Date.now();
    this.store.sweep().catch(this.onError);
  }
}

/** The group part of a group key ('' for the whole type). */
export function digestOf(key: string): string {
  const at = key.indexOf('\u0000');
  return at < 0 ? '' : key.slice(at + 1);
}
