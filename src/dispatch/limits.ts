/**
 * Type admission: a paused type and run limits per type (per group when `groupBy` names a payload
 * field), in the dispatcher's path. The dispatcher asks `admit` for every task it has locked,
 * before it runs or leases it; a task refused here is not claimed: it stays pending, uses no
 * attempt, and waits (waiting-room.ts, its id still busy in the due queue) until it may run:
 *
 * - paused: until the type is resumed; then the waiting tasks go back in (runAt, id) order.
 * - maxConcurrency: at most N admitted and not yet finished at once (run-counts.ts); a finished
 *   run wakes the next waiting task of its group.
 * - ratePerSecond: at most R starts in any one-second window (rate-window.ts). A refused task
 *   wakes when the oldest start of the window leaves it (wake-timers.ts).
 *
 * A waiting task is never failed: a woken one is claimed again, and when it is still over a
 * limit it waits again. What waited past the misfire grace follows its misfire rule (the
 * dispatcher asks `waited`).
 *
 * The settings in force (settings-cache.ts) are put here by TypeControls (type-controls.ts), the
 * one owner of reading and writing them; this file never reads the table. With `fleet` (every
 * service has it) the limits hold for all processes together: before the plan asks `admit`, the
 * batch `reserve`s the fleet's slots in the database for its tasks of limited types
 * (fleet-slots.ts), and a task of a limited type starts only with one. A group the fleet refused
 * is asked again every FLEET_POLL_MS (other processes' frees are seen so) or at once when a run of
 * it here ends. The pause is stored and so holds for all.
 */
import { createHash } from 'node:crypto';
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import type { Task } from '../store/task-types.js';
import type { Wait } from '../store/task-types.js';
import type { TypeControl } from '../store/type-controls.js';
import { nextRoomAt, roomInWindow, fitsWindow, MAX_GROUPS, StartTimes } from './rate-window.js';
import { RunCounts } from './run-counts.js';
import { SettingsCache } from './settings-cache.js';
import { WaitingRoom, type WaitReason, type Waiting } from './waiting-room.js';
import { WakeTimers } from './wake-timers.js';
import { FleetSlots, type FleetGrant } from './fleet-slots.js';

/** How soon a group the fleet's slots refused is asked again (another process's free is seen so). */
export const FLEET_POLL_MS = 150;

/**
 * The safety net of the wake-ups: every type with tasks waiting here is asked again this often,
 * whatever woke it last, so no wake-up lost on some path (a woken task done elsewhere meanwhile, a
 * batch put back on the timers) leaves a task waiting longer than this for a limit that has room.
 */
export const WAKE_SWEEP_MS = 1_000;

/** How long a woken task is followed (handed to the dispatcher, not yet admitted nor held again). */
const HANDED_KEPT_MS = 10_000;

/** One admitted run: handed back with `release` when it finished, or `rollBack` when it never began. */
export interface Ticket {
  readonly type: string;
  readonly key: string;
  readonly startedAt: number;
  /** The fleet's slots it holds (a limited type's run, with `fleet`). */
  readonly grant?: FleetGrant;
  /** How long the task waited here for the pause or a limit before this admission (none: it did not). */
  readonly waited?: Wait;
}

export interface TypeState {
  control: TypeControl | undefined;
  /** Runs admitted in this process and not finished yet. */
  running: number;
  /** Due tasks waiting here for the pause or a limit. */
  waiting: number;
}

export interface TypeAdmissionOptions {
  /** How many due tasks one type may hold back in this process (waiting-room.ts). */
  waitingPerType?: number;
  /** Where the per-type gauges (paused, running, waiting) go. */
  registry?: Registry;
  /** How many groups the rate windows keep at most (rate-window.ts, MAX_GROUPS). */
  maxGroups?: number;
  /** The limits for the whole fleet (fleet-slots.ts): without it they hold per process. */
  fleet?: FleetSlots;
}

export class TypeAdmission {
  readonly #settings = new SettingsCache();
  readonly #running = new RunCounts();
  readonly #starts: StartTimes;
  readonly #room: WaitingRoom;
  readonly #timers = new WakeTimers();
  readonly #fleet: FleetSlots | undefined;
  /** Grants `reserve` took, by task id, until `admit` hands them to a ticket or `dropUnused` frees them. */
  readonly #grants = new Map<number, FleetGrant>();
  /** Group keys the fleet refused, until when they are not asked again (bounded like the rate windows). */
  readonly #refused = new Map<string, number>();
  readonly #maxGroups: number;
  /**
   * Woken tasks handed to the dispatcher, by id: their type and when. Each one took a place a wake
   * counted as free; it ends admitted, held again, or back without either (`returned`: done or
   * moved elsewhere meanwhile), and then its place is offered to the next waiting task.
   */
  readonly #handed = new Map<number, { type: string; at: number }>();
  #sweep: NodeJS.Timeout | undefined;
  #onReady: (ids: number[]) => void = () => undefined;
  #stopped = false;

  constructor(
    private readonly clock: Clock,
    options: TypeAdmissionOptions = {},
  ) {
    this.#room = new WaitingRoom(options.waitingPerType, () => clock.now());
    this.#starts = new StartTimes(options.maxGroups);
    this.#maxGroups = options.maxGroups ?? MAX_GROUPS;
    this.#fleet = options.fleet;
    if (options.registry !== undefined) registerTypeGauges(options.registry, () => this.states());
  }

  /** Where woken ids go (the dispatcher), in the order they should run. */
  consume(onReady: (ids: number[]) => void): void {
    this.#onReady = onReady;
  }

  /** Puts the stored settings in force; the waiting tasks of every type they change are asked again. */
  apply(controls: readonly TypeControl[]): void {
    // A changed setting may change every waiting task's group: all of them are asked again.
    for (const type of this.#settings.replace(controls)) this.#wakeAll(type);
  }

  control(type: string): TypeControl | undefined {
    return this.#settings.get(type);
  }

  /** Every type this process knows something about: stored settings, runs or waiting tasks. */
  states(): Map<string, TypeState> {
    const types = new Set([...this.#settings.types(), ...this.#running.types(), ...this.#room.types()]);
    return new Map(
      [...types].map((type) => [
        type,
        { control: this.#settings.get(type), running: this.#running.ofType(type), waiting: this.#room.sizeOf(type) },
      ]),
    );
  }

  /**
   * A locked task may start at `now` (the time its run is said to start): a ticket, counted until
   * released. Undefined: it must wait; the caller hands it to `hold` once its transaction ended.
   */
  admit(task: Task, now: number): Ticket | undefined {
    this.#handed.delete(task.id);
    const control = this.#settings.get(task.type);
    const key = keyOf(task, control);
    let grant: FleetGrant | undefined;
    if (this.#fleet !== undefined && FleetSlots.limits(control)) {
      // The fleet decides: the slots reserve took for it, or none (it waits).
      grant = this.#grants.get(task.id);
      this.#grants.delete(task.id);
      if (control!.paused || grant === undefined) {
        if (grant !== undefined) void this.#fleet.rollBack(grant);
        return undefined;
      }
    } else if (this.#refusal(control, key, now) !== undefined) return undefined;
    this.#running.start(task.type, key);
    if (control?.ratePerSecond != null) this.#starts.record(key, now, control.ratePerSecond);
    const waited = this.#room.takeWait(task.id);
    return { type: task.type, key, startedAt: now, ...(grant === undefined ? {} : { grant }), ...(waited === undefined ? {} : { waited }) };
  }

  /**
   * Takes the fleet's slots for the locked `tasks` of limited types (in (runAt, id) order per
   * group), for `admit` to find; a group that got fewer than it asked is refused for
   * FLEET_POLL_MS. A run slot lasts `leaseMsOf(task)` at most. Without `fleet`, nothing.
   */
  async reserve(tasks: readonly Task[], leaseMsOf: (task: Task) => number): Promise<void> {
    const fleet = this.#fleet;
    if (fleet === undefined) return;
    const groups = new Map<string, { control: TypeControl; tasks: Task[] }>();
    for (const task of [...tasks].sort((a, b) => a.runAt - b.runAt || a.id - b.id)) {
      const control = this.#settings.get(task.type);
      if (!FleetSlots.limits(control) || control!.paused) continue;
      const key = keyOf(task, control);
      const group = groups.get(key) ?? { control: control!, tasks: [] };
      group.tasks.push(task);
      groups.set(key, group);
    }
    for (const [key, { control, tasks: waiting }] of groups) {
      const leaseMs = Math.max(...waiting.map(leaseMsOf));
      const grants = await fleet.take(key, control, waiting.length, leaseMs);
      grants.forEach((grant, i) => this.#grants.set(waiting[i]!.id, grant));
      if (grants.length < waiting.length) this.#refuse(key);
    }
  }

  /** Grants `reserve` took for `ids` that no ticket took (the task was not admitted, or the try failed): freed. */
  dropUnused(ids: readonly number[]): void {
    for (const id of ids) {
      const grant = this.#grants.get(id);
      if (grant === undefined) continue;
      this.#grants.delete(id);
      void this.#fleet?.rollBack(grant);
    }
  }

  /** The run `ticket` admitted finished: its slot frees, and the next waiting task of its type may go. */
  release(ticket: Ticket): void {
    this.#running.finish(ticket.type, ticket.key);
    this.#afterFree(ticket, false);
  }

  /** The run `ticket` admitted never began (its transaction rolled back): its start is forgotten too, its wait kept. */
  rollBack(ticket: Ticket, id?: number): void {
    if (id !== undefined && ticket.waited !== undefined) this.#room.giveBack(id, ticket.waited);
    this.#starts.forget(ticket.key, ticket.startedAt);
    this.#running.finish(ticket.type, ticket.key);
    this.#afterFree(ticket, true);
  }

  /** Wakes the type's waiting tasks; with a grant, once the fleet's slot is free (so the next one finds it). */
  #afterFree(ticket: Ticket, never: boolean): void {
    const { grant } = ticket;
    if (grant === undefined || this.#fleet === undefined) {
      this.#wake(ticket.type);
      return;
    }
    void (never ? this.#fleet.rollBack(grant) : this.#fleet.release(grant)).then(() => {
      this.#refused.delete(ticket.key);
      this.#wake(ticket.type);
    });
  }

  /** The fleet had no slot for `key`: it is not asked again for FLEET_POLL_MS. */
  #refuse(key: string): void {
    this.#refused.delete(key);
    this.#refused.set(key, this.clock.now() + FLEET_POLL_MS);
    while (this.#refused.size > this.#maxGroups) this.#refused.delete(this.#refused.keys().next().value!);
  }

  /** Until when the fleet refused `key` (undefined when it may be asked now). */
  #refusedUntil(key: string, now: number): number | undefined {
    const until = this.#refused.get(key);
    if (until === undefined) return undefined;
    if (until > now) return until;
    this.#refused.delete(key);
    return undefined;
  }

  /**
   * A task `admit` refused: it waits here until the pause or limit lets it through. False when its
   * type's waiting room is full: the caller leaves it to the table.
   */
  hold(task: Task): boolean {
    this.#handed.delete(task.id);
    if (this.#stopped) return true;
    const control = this.#settings.get(task.type);
    const key = keyOf(task, control);
    const reason: WaitReason = this.#refusal(control, key, this.clock.now()) ?? 'concurrency';
    if (!this.#room.enter(task.type, { id: task.id, runAt: task.runAt, key, reason, since: this.clock.now() })) return false;
    this.#sweepSoon();
    // Whatever freed meanwhile (a run finished between the refusal and now) is not missed.
    this.#wake(task.type);
    return true;
  }

  /**
   * The dispatcher is done with `ids` without running them (cancelled, done or moved by another
   * process since they were woken, or run and finished): a woken one's place goes to the next
   * waiting task of its type at once. Without this, a wake that handed out the places of tasks
   * another process had already run would wait for the sweep.
   */
  returned(ids: readonly number[]): void {
    const types = new Set<string>();
    for (const id of ids) {
      const handed = this.#handed.get(id);
      if (handed === undefined) continue;
      this.#handed.delete(id);
      types.add(handed.type);
    }
    for (const type of types) this.#wake(type);
  }

  /** How many groups the rate windows keep starts for (bounded: rate-window.ts). */
  get groupsTracked(): number {
    return this.#starts.size;
  }

  /** How many groups the fleet refused are held back from asking again (bounded by maxGroups too). */
  get groupsRefused(): number {
    return this.#refused.size;
  }

  /** The clock moved (the test clock): each type's waiting tasks are looked at now, not at the next sweep. */
  wakeAll(): void {
    for (const type of [...this.#room.types()]) this.#wake(type);
  }

  /** Whether `id` waited here (once asked, forgotten: also for ids done with otherwise). */
  waited(id: number): boolean {
    return this.#room.hasWaited(id);
  }

  /** Stops waking anything; the waiting tasks stay pending in the table for the next process. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#sweep);
    this.#sweep = undefined;
    this.#handed.clear();
    this.#timers.clear();
    this.#room.clear();
    this.#refused.clear();
  }

  // ── inside ──────────────────────────────────────────────────────────────────────────────

  #refusal(control: TypeControl | undefined, key: string, now: number): WaitReason | undefined {
    if (control === undefined) return undefined;
    if (control.paused) return 'paused';
    if (control.maxConcurrency !== null && this.#running.ofKey(key) >= control.maxConcurrency) return 'concurrency';
    const rate = control.ratePerSecond;
    if (rate !== null && !fitsWindow(this.#starts.of(key, now, rate), now, rate)) return 'rate';
    return undefined;
  }

  /** A changed setting: every waiting task of `type` is asked again (unless it is paused). */
  #wakeAll(type: string): void {
    if (this.#stopped || this.#settings.get(type)?.paused) return;
    this.#hand(type, this.#room.leaveAll(type));
  }

  /**
   * Hands back the waiting tasks of `type` that may run now, in (runAt, id) order: per group, as
   * many as its free slots and its rate window allow. A group held by its rate gets a timer for
   * when its window has room.
   */
  #wake(type: string): void {
    const control = this.#settings.get(type);
    if (this.#stopped || this.#room.sizeOf(type) === 0 || control?.paused) return;
    const now = this.clock.now();
    const room = new Map<string, number>();
    const woken = this.#room.leave(type, ({ key }) => {
      if (!room.has(key)) room.set(key, this.#roomOf(control, key, now));
      const left = room.get(key)!;
      room.set(key, left - 1);
      return left > 0;
    });
    const rate = control?.ratePerSecond;
    for (const [key, left] of room) {
      if (left > 0) continue;
      const refused = this.#refusedUntil(key, now);
      if (refused !== undefined) this.#timers.set(key, refused - now, () => this.#wake(type));
      else if (rate != null) {
        const at = nextRoomAt(this.#starts.of(key, now, rate), now, rate);
        this.#timers.set(key, at - now, () => this.#wake(type));
      }
    }
    this.#hand(type, woken);
  }

  #hand(type: string, woken: Waiting[]): void {
    if (woken.length === 0) return;
    const at = this.clock.now();
    for (const { id } of woken) this.#handed.set(id, { type, at });
    this.#onReady(woken.map(({ id }) => id));
  }

  /** The sweep runs while tasks wait here (WAKE_SWEEP_MS), and stops once none does. */
  #sweepSoon(): void {
    if (this.#sweep !== undefined || this.#stopped) return;
    this.#sweep = setTimeout(() => {
      this.#sweep = undefined;
      const now = this.clock.now();
      // A handed task that never came back (put back on its timer, say) is not followed for ever.
      for (const [id, { at }] of this.#handed) if (at < now - HANDED_KEPT_MS) this.#handed.delete(id);
      const types = [...this.#room.types()];
      for (const type of types) this.#wake(type);
      if (types.length > 0 || this.#handed.size > 0) this.#sweepSoon();
    }, WAKE_SWEEP_MS);
    this.#sweep.unref();
  }

  /** How many more runs of `key` may start now (more than that is harmless: they wait again). */
  #roomOf(control: TypeControl | undefined, key: string, now: number): number {
    if (this.#refusedUntil(key, now) !== undefined) return 0;
    let room = Number.POSITIVE_INFINITY;
    if (control?.maxConcurrency != null) room = Math.min(room, control.maxConcurrency - this.#running.ofKey(key));
    const rate = control?.ratePerSecond;
    if (rate != null) room = Math.min(room, roomInWindow(this.#starts.of(key, now, rate), now, rate));
    return room;
  }
}

/** The groupBy that names the task's own `group` field. */
export const GROUP_FIELD = 'group';

/**
 * A task's group under its type's limits: the type, or the type and a digest of the `groupBy`
 * field's value. A digest, not the value: the value may be as large as the payload (64 KiB with
 * `groupBy: "body"`), and every map of the limits holds the key. 128 bits of SHA-256: two values
 * sharing a group by chance is not a concern.
 */
export function keyOf(
  task: Pick<Task, 'type' | 'payload'> & { group?: string | null },
  control: Pick<TypeControl, 'groupBy'> | undefined,
): string {
  if (control?.groupBy == null) return task.type;
  // "group": the task's own group field, which every type has (the built-in handlers' payloads
  // are closed); a task without one falls back to a payload field of that name. Only the
  // payload's own fields: `groupBy: "constructor"` (or toString, __proto__…) would otherwise read
  // Object.prototype's, a function JSON cannot write, and every run of the type would throw here.
  const value =
    control.groupBy === GROUP_FIELD && task.group != null
      ? task.group
      : typeof task.payload === 'object' && task.payload !== null && Object.hasOwn(task.payload, control.groupBy)
        ? (task.payload as Record<string, unknown>)[control.groupBy]
        : undefined;
  const text = value === undefined ? '' : typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return `${task.type}\u0000${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`;
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
