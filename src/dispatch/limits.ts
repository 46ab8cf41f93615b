/**
 * Type controls in the dispatcher's path: a paused type and run limits per type (per group when
 * `groupBy` names a payload field). The dispatcher asks `admit` for every task it has locked,
 * before it runs or leases it; a task refused here is not claimed: it stays pending, uses no
 * attempt, and waits here (its id still busy in the due queue) until it may run:
 *
 * - paused: until the type is resumed; then the waiting tasks go back in (runAt, id) order.
 * - maxConcurrency: at most N admitted and not yet finished at once; a finished run wakes the
 *   next waiting task of its group.
 * - ratePerSecond: at most R starts in any one-second window (a sliding window of the start
 *   times, the stricter form of a token bucket: a full bucket would let 2R through in one second).
 *   A refused task wakes when the oldest start of the window leaves it.
 *
 * A waiting task is never failed: a woken one is claimed again, and when it is still over a
 * limit it waits again. What waited past the misfire grace follows its misfire rule (the
 * dispatcher asks `waited`).
 *
 * The limits are this process's: with several processes each applies them to its own runs (N
 * per process, not N in all). The pause is stored and so holds for all; each process reads the
 * settings at boot, after a change made through it, and at each reconcile.
 */
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import { loggable } from '../db/errors.js';
import type { Task } from '../store/task-store.js';
import type { TypeControl, TypeControlStore } from '../store/type-controls.js';

/** One admitted run: given back with `release` when it finished (or did not start after all). */
export interface Ticket {
  readonly type: string;
  readonly key: string;
  readonly startedAt: number;
}

type Reason = 'paused' | 'concurrency' | 'rate';

/** A waiting task, without its payload: a paused type may hold back many. */
interface Waiting {
  id: number;
  runAt: number;
  key: string;
  reason: Reason;
}

export interface TypeState {
  control: TypeControl | undefined;
  /** Runs admitted in this process and not finished yet. */
  running: number;
  /** Due tasks waiting here for the pause or a limit. */
  waiting: number;
}

const WINDOW_MS = 1000;

export class TypeLimits {
  #controls = new Map<string, TypeControl>();
  readonly #running = new Map<string, number>();
  readonly #runningByType = new Map<string, number>();
  /** Start times per group key, sorted, the last two windows' worth. */
  readonly #starts = new Map<string, number[]>();
  /** Waiting tasks per type, by id. */
  readonly #waiting = new Map<string, Map<number, Waiting>>();
  /** Ids that waited here and were woken: the misfire rule applies to them. */
  readonly #waited = new Set<number>();
  /** One wake-up timer per group key waiting for its rate window. */
  readonly #rateTimers = new Map<string, NodeJS.Timeout>();
  #onReady: (ids: number[]) => void = () => undefined;
  #stopped = false;

  /** `registry`: where the per-type gauges (paused, running, waiting) go. */
  constructor(
    private readonly store: TypeControlStore,
    private readonly clock: Clock,
    private readonly log: Logger,
    registry?: Registry,
  ) {
    if (registry !== undefined) registerTypeGauges(registry, () => this.states());
  }

  /** Where woken ids go (the dispatcher), in the order they should run. */
  consume(onReady: (ids: number[]) => void): void {
    this.#onReady = onReady;
  }

  /** Reads the stored settings; tasks a change lets through are woken. */
  async load(): Promise<void> {
    const controls = new Map((await this.store.list()).map((control) => [control.type, control]));
    const before = this.#controls;
    this.#controls = controls;
    for (const type of new Set([...before.keys(), ...controls.keys()])) {
      // A changed setting may change every waiting task's group: all of them are asked again.
      if (JSON.stringify(before.get(type)) !== JSON.stringify(controls.get(type))) this.#wake(type, true);
    }
  }

  /** load(), logging a failure instead of throwing (the last settings stay in force). */
  reload(): void {
    this.load().catch((error: unknown) =>
      this.log.warn({ err: loggable(error) }, 'could not read the type controls; keeping the last ones'),
    );
  }

  control(type: string): TypeControl | undefined {
    return this.#controls.get(type);
  }

  /** Every type this process knows something about: stored settings, runs or waiting tasks. */
  states(): Map<string, TypeState> {
    const types = new Set([...this.#controls.keys(), ...this.#runningByType.keys(), ...this.#waiting.keys()]);
    return new Map(
      [...types].map((type) => [
        type,
        { control: this.#controls.get(type), running: this.#runningByType.get(type) ?? 0, waiting: this.#waiting.get(type)?.size ?? 0 },
      ]),
    );
  }

  /**
   * A locked task may start at `now` (the time its run is said to start): a ticket, counted until
   * released. Undefined: it must wait; the caller hands it to `hold` once its transaction ended.
   */
  admit(task: Task, now: number): Ticket | undefined {
    const control = this.#controls.get(task.type);
    const key = this.#keyOf(task, control);
    if (this.#refusal(control, key, now) !== undefined) return undefined;
    this.#add(this.#running, key, 1);
    this.#add(this.#runningByType, task.type, 1);
    if (control?.ratePerSecond != null) {
      const starts = this.#startsOf(key, now, control.ratePerSecond);
      starts.splice(sortedIndex(starts, now), 0, now);
    }
    return { type: task.type, key, startedAt: now };
  }

  /** A run admitted by `ticket` finished; `started` false when it never began (its transaction rolled back). */
  release(ticket: Ticket, started = true): void {
    this.#add(this.#running, ticket.key, -1);
    this.#add(this.#runningByType, ticket.type, -1);
    if (!started) {
      const starts = this.#starts.get(ticket.key);
      const at = starts?.indexOf(ticket.startedAt) ?? -1;
      if (at >= 0) starts!.splice(at, 1);
    }
    this.#wake(ticket.type);
  }

  /** A task `admit` refused: it waits here until the pause or limit lets it through. */
  hold(task: Task): void {
    if (this.#stopped) return;
    const control = this.#controls.get(task.type);
    const key = this.#keyOf(task, control);
    const now = this.clock.now();
    const reason = this.#refusal(control, key, now) ?? 'concurrency';
    let waiting = this.#waiting.get(task.type);
    if (waiting === undefined) this.#waiting.set(task.type, (waiting = new Map()));
    waiting.set(task.id, { id: task.id, runAt: task.runAt, key, reason });
    // Whatever freed meanwhile (a run finished between the refusal and now) is not missed.
    this.#wake(task.type);
  }

  /** Whether `id` waited here (once asked, forgotten: also for ids done with otherwise). */
  waited(id: number): boolean {
    return this.#waited.delete(id);
  }

  /** Due tasks of `type` waiting here. */
  waitingOf(type: string): number {
    return this.#waiting.get(type)?.size ?? 0;
  }

  /** Stops waking anything; the waiting tasks stay pending in the table for the next process. */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#rateTimers.values()) clearTimeout(timer);
    this.#rateTimers.clear();
    this.#waiting.clear();
  }

  // ── inside ──────────────────────────────────────────────────────────────────────────────

  #keyOf(task: Task, control: TypeControl | undefined): string {
    if (control?.groupBy == null) return task.type;
    const value =
      typeof task.payload === 'object' && task.payload !== null ? (task.payload as Record<string, unknown>)[control.groupBy] : undefined;
    return `${task.type}\u0000${value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value)}`;
  }

  #refusal(control: TypeControl | undefined, key: string, now: number): Reason | undefined {
    if (control === undefined) return undefined;
    if (control.paused) return 'paused';
    if (control.maxConcurrency !== null && (this.#running.get(key) ?? 0) >= control.maxConcurrency) return 'concurrency';
    if (control.ratePerSecond !== null && !fitsWindow(this.#startsOf(key, now, control.ratePerSecond), now, control.ratePerSecond))
      return 'rate';
    return undefined;
  }

  /** The start times of `key`, those too old to matter at `rate` dropped. */
  #startsOf(key: string, now: number, rate: number): number[] {
    let starts = this.#starts.get(key);
    if (starts === undefined) this.#starts.set(key, (starts = []));
    const keep = 2 * Math.max(WINDOW_MS, WINDOW_MS / rate);
    let old = 0;
    while (old < starts.length && starts[old]! <= now - keep) old++;
    if (old > 0) starts.splice(0, old);
    return starts;
  }

  #add(counts: Map<string, number>, key: string, delta: number): void {
    const value = (counts.get(key) ?? 0) + delta;
    if (value <= 0) counts.delete(key);
    else counts.set(key, value);
  }

  /**
   * Hands back the waiting tasks of `type` that may run now, in (runAt, id) order: per group, as
   * many as its free slots and its rate window allow. A group held by its rate gets a timer for
   * when its window has room.
   */
  #wake(type: string, all = false): void {
    const waiting = this.#waiting.get(type);
    if (this.#stopped || waiting === undefined || waiting.size === 0) return;
    const control = this.#controls.get(type);
    if (control?.paused) return;
    const now = this.clock.now();
    const room = new Map<string, number>();
    const woken: Waiting[] = [];
    for (const entry of [...waiting.values()].sort((a, b) => a.runAt - b.runAt || a.id - b.id)) {
      if (all) {
        woken.push(entry);
        continue;
      }
      const key = entry.key;
      if (!room.has(key)) room.set(key, this.#roomOf(control, key, now));
      const left = room.get(key)!;
      if (left <= 0) continue;
      room.set(key, left - 1);
      woken.push(entry);
    }
    for (const [key, left] of room) if (left <= 0 && control?.ratePerSecond != null) this.#wakeLater(type, key, now, control.ratePerSecond);
    if (woken.length === 0) return;
    for (const { id } of woken) {
      waiting.delete(id);
      this.#waited.add(id);
    }
    if (waiting.size === 0) this.#waiting.delete(type);
    this.#onReady(woken.map(({ id }) => id));
  }

  /** How many more runs of `key` may start now (more than that is harmless: they wait again). */
  #roomOf(control: TypeControl | undefined, key: string, now: number): number {
    let room = Number.POSITIVE_INFINITY;
    if (control?.maxConcurrency != null) room = Math.min(room, control.maxConcurrency - (this.#running.get(key) ?? 0));
    if (control?.ratePerSecond != null) {
      const starts = this.#startsOf(key, now, control.ratePerSecond);
      const recent = starts.filter((at) => at > now - WINDOW_MS).length;
      room = Math.min(room, fitsWindow(starts, now, control.ratePerSecond) ? Math.max(1, Math.floor(control.ratePerSecond) - recent) : 0);
    }
    return room;
  }

  /** A wake-up for `key` once the oldest start in its window has left it. */
  #wakeLater(type: string, key: string, now: number, rate: number): void {
    if (this.#rateTimers.has(key)) return;
    const span = Math.max(WINDOW_MS, WINDOW_MS / rate);
    const inWindow = this.#startsOf(key, now, rate).filter((at) => at > now - span);
    const at = inWindow.length > 0 ? inWindow[0]! + span + 1 : now + 1;
    const timer = setTimeout(
      () => {
        this.#rateTimers.delete(key);
        this.#wake(type);
      },
      Math.max(1, at - now),
    );
    timer.unref();
    this.#rateTimers.set(key, timer);
  }
}

function sortedIndex(sorted: number[], value: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (sorted[mid]! <= value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * Whether one more start at `now` keeps every one-second window [w, w + 1 s) at or under
 * `rate` starts. Starts need not come in time order (two batches read their time before taking
 * their turn), so the windows after `now` count too, not only the one ending at it.
 */
export function fitsWindow(starts: readonly number[], now: number, rate: number): boolean {
  if (rate < 1) return fractionFits(starts, now, rate);
  const limit = Math.floor(rate);
  const near = starts.filter((at) => at > now - WINDOW_MS && at < now + WINDOW_MS);
  near.splice(sortedIndex(near, now), 0, now);
  // Windows that hold `now` start at `now` or at a start before it: count each one's starts.
  let end = 0;
  for (let i = 0; i < near.length && near[i]! <= now; i++) {
    if (end < i) end = i;
    while (end < near.length && near[end]! < near[i]! + WINDOW_MS) end++;
    if (end - i > limit) return false;
  }
  return true;
}

/** A rate under one per second: one start per 1/rate seconds. */
function fractionFits(starts: readonly number[], now: number, rate: number): boolean {
  const gap = WINDOW_MS / rate;
  return starts.every((at) => Math.abs(now - at) >= gap);
}

/** Each type's pause and this process's runs and waiting tasks, read at scrape time. */
function registerTypeGauges(registry: Registry, states: () => Map<string, TypeState>): void {
  const typeGauge = (name: string, help: string, value: (state: TypeState) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['type'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [type, state] of states()) this.set({ type }, value(state));
      },
    });
  typeGauge('punctual_type_paused', '1 when the type is paused (its due tasks wait, none starts), else 0.', (state) =>
    state.control?.paused ? 1 : 0,
  );
  typeGauge(
    'punctual_type_running',
    'Runs of the type in this process now (its concurrency limit counts these).',
    (state) => state.running,
  );
  typeGauge(
    'punctual_type_waiting',
    'Due tasks of the type held back in this process by its pause or its limits (pending, no attempt used).',
    (state) => state.waiting,
  );
}
