/**
 * The pull hub: where pull workers' lease requests wait (long poll) until a task of their types
 * falls due, and the one place that leases to them. A request is answered at once when due tasks
 * are there; otherwise it waits, FIFO, until a task of its types falls due or its `waitMs` passes
 * (then it gets no task). Waiting costs a bounded amount of memory: at most `maxWaiting` requests
 * wait in this process, one more is refused at once; a request whose client went away leaves the
 * queue; a stop answers every waiting request at once, with no task.
 *
 * How a waiting worker hears of a due task (a worker type's task has no timer of its own, and
 * the dispatcher never locks it: timers/arming.ts):
 * - a look ahead in each claim, read with its lock (one round trip where pipelined): when the next task of
 *   its types falls due, and a timer set at that instant as soon as the lock answers, before the
 *   COMMIT (one timer for the hub, the earliest wins), so a task due during a claim is served by
 *   the next one, which starts as this one ends; it finds what this process wrote, what another process wrote (SHARDING=on too),
 *   and what the shop inserted itself;
 * - the tasks this process creates, moves or retries (`dueAt`, from the arming): the timer is
 *   brought forward when one falls due before it;
 * - a peek at the table, while requests wait: when the next task of their types falls due or a
 *   lease of theirs runs out, read every `peekMs`, and a timer set at that instant.
 *
 * Requests that are ready together share one claim (lifecycle/pull.ts `leaseMany`): those that
 * just arrived, and those waiting on a type a task of which fell due. One claim runs at a time
 * (CLAIMS_AT_ONCE): what arrives or falls due during it is served by the next, which starts as it
 * ends, so each claim serves more requests and the process makes fewer of them.
 *
 * Fair: the longest waiting request whose types match is served first, and a served request leaves
 * the queue. Leases are conditional claims in the database (pull.ts), so two workers, in this
 * process or in two, never get one task. A claim that loses its rows to another process's (a
 * deadlock, or on Galera a write conflict between two nodes, through every try) fails no request:
 * its requests claim again after a short random pause, within their waitMs. Paused types are not leased; a type's maxConcurrency counts
 * the leases held across the fleet. See docs/workers.md.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import { isLockConflict, loggable } from '../db/errors.js';
import { newPullToken, type PullLifecycle } from '../lifecycle/pull.js';
import type { PullStore } from '../store/pulls.js';
import type { Task } from '../store/task-types.js';
import type { TypeAdmission } from './limits.js';

export interface LeaseRequest {
  types: readonly string[];
  max: number;
  leaseMs: number;
  waitMs: number;
}

export interface LeasedTask {
  task: Task;
  leaseToken: string;
  leaseUntil: number;
}

/** More requests wait than WORKER_MAX_WAITING allows. */
export class TooManyWaiting extends Error {
  override name = 'TooManyWaiting';
}

export interface PullHubOptions {
  lifecycle: PullLifecycle;
  pulls: PullStore;
  limits: TypeAdmission;
  clock: Clock;
  log: Logger;
  maxWaiting: number;
  /** A claim met a task past its expireAfterMs and ended it as expired (committed). */
  onExpired?: (task: Task, now: number) => void;
  /** How often waiting requests' types are looked up in the table (what other processes armed or created). */
  peekMs?: number;
  registry?: Registry;
}

interface Waiter {
  request: LeaseRequest;
  types: ReadonlySet<string>;
  resolve: (tasks: LeasedTask[]) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
  done: boolean;
  /** Not past its first claim yet: it is answered with what that finds, or then starts to wait. */
  arriving: boolean;
  /** A claim for it is under way: it leaves when the claim is over, with what it got. */
  claiming: boolean;
  /** Its time ran out or its client went away during a claim. */
  wantsOut: boolean;
}

/**
 * What a claim leased for each request of its group; the types whose lock came back full, and
 * those held back (paused, at their limit); when the next task of each set of types falls due.
 */
interface Claimed {
  leased: LeasedTask[][];
  more: Set<string>;
  held: Set<string>;
  upcoming: Upcoming[];
}

/** When the next task of `types` falls due (a claim's look ahead). */
interface Upcoming {
  types: readonly string[];
  at: number;
}

const DEFAULT_PEEK_MS = 1000;
/** The most tasks one claim asks for (the sum of its requests' `max`); the other requests are served by the next. */
const CLAIM_AT_MOST = 1000;
/**
 * Claims under way at once (each a transaction on a connection of the pool). One: B10 at 1,000
 * tasks/s gave a p99 of 15–20 ms with one and 28–40 ms with three (three share the CPU and the
 * database among more, smaller claims), and a drain of 8,400–8,900 tasks/s against 5,900.
 */
const CLAIMS_AT_ONCE = 1;

export class PullHub {
  readonly #options: PullHubOptions;
  /** Requests, oldest first: those that wait, and those arriving (before their first claim). */
  #queue: Waiter[] = [];
  /** How many of the queue wait (past their first claim). */
  #waitingCount = 0;
  /** Types with a task due (or a request arrived for them) since the last claim. */
  readonly #woken = new Set<string>();
  /** A serve is coming (setImmediate). */
  #scheduled = false;
  /** Claims under way. */
  #claims = 0;
  #stopped = false;
  #peekTimer: NodeJS.Timeout | undefined;
  #dueTimer: NodeJS.Timeout | undefined;
  #dueAt = Number.POSITIVE_INFINITY;
  /** The types the due timer wakes. */
  readonly #dueTypes = new Set<string>();
  readonly #metrics: { leased: Counter; waiting: Gauge; refused: Counter; claims: Counter; conflicts: Counter } | undefined;

  constructor(options: PullHubOptions) {
    this.#options = options;
    if (options.registry !== undefined) {
      this.#metrics = {
        leased: new Counter({
          name: 'punctual_pull_leased_total',
          help: 'Tasks of worker types leased to pull workers, by type.',
          labelNames: ['type'],
          registers: [options.registry],
        }),
        waiting: new Gauge({
          name: 'punctual_pull_waiting_requests',
          help: 'Lease requests waiting (long poll) in this process.',
          registers: [options.registry],
          collect: () => undefined,
        }),
        refused: new Counter({
          name: 'punctual_pull_refused_total',
          help: 'Lease requests refused because WORKER_MAX_WAITING requests were waiting already.',
          registers: [options.registry],
        }),
        claims: new Counter({
          name: 'punctual_pull_claims_total',
          help: 'Claim transactions of the pull hub (each serves every lease request that was ready for it).',
          registers: [options.registry],
        }),
        conflicts: new Counter({
          name: 'punctual_pull_claim_conflicts_total',
          help: 'Claims that lost their rows to another transaction through every try (another process leased them); claimed again soon.',
          registers: [options.registry],
        }),
      };
    }
  }

  /**
   * The clock moved (the test clock): the wake-up timer is set again against the new time (waking
   * now what fell due), and the waiting requests' types are looked up again at once.
   */
  clockMoved(): void {
    if (this.#stopped) return;
    if (this.#dueAt !== Number.POSITIVE_INFINITY) {
      const at = this.#dueAt;
      const types = [...this.#dueTypes];
      clearTimeout(this.#dueTimer);
      this.#dueAt = Number.POSITIVE_INFINITY;
      this.#dueTypes.clear();
      this.#wakeAt(at, types);
    }
    if (this.#waitingCount > 0) this.#schedulePeek(0);
  }

  /** Lease requests waiting for a task (past their first look). */
  get waiting(): number {
    return this.#waitingCount;
  }

  /**
   * Leases due tasks of `request.types` now, or waits for one up to `request.waitMs`; `signal`
   * aborts the wait (the client went away). Rejects with TooManyWaiting when no place is left.
   * Requests that arrive together share one claim with the requests that wait.
   */
  lease(request: LeaseRequest, signal?: AbortSignal): Promise<LeasedTask[]> {
    if (this.#stopped || signal?.aborted === true) return Promise.resolve([]);
    return new Promise<LeasedTask[]>((resolve, reject) => {
      const waiter: Waiter = {
        request,
        types: new Set(request.types),
        resolve,
        reject,
        timer: undefined,
        done: false,
        arriving: true,
        claiming: false,
        wantsOut: false,
      };
      signal?.addEventListener('abort', () => this.#leave(waiter, []), { once: true });
      this.#queue.push(waiter);
      this.#serveSoon();
    });
  }

  /**
   * A task of worker type `type`, written by this process, falls due at `runAt`: the waiting
   * requests of the type are woken then. Nothing to do when no request is there: one that comes
   * claims at once, and looks ahead.
   */
  dueAt(type: string, runAt: number): void {
    if (this.#stopped || this.#queue.length === 0) return;
    this.#wakeAt(runAt, [type]);
  }

  /** Tasks of worker types fell due (the dispatcher, after its batch: one that got a timer all the same, as a bulk retry, which knows ids only, arms it): the waiting requests of their types are served. */
  due(tasks: readonly Task[]): void {
    if (this.#stopped || this.#queue.length === 0) return;
    for (const task of tasks) this.#woken.add(task.type);
    this.#serveSoon();
  }

  /** Answers every waiting request at once, with no task; later requests get none either. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#peekTimer);
    clearTimeout(this.#dueTimer);
    for (const waiter of [...this.#queue]) this.#leave(waiter, []);
  }

  #leave(waiter: Waiter, tasks: LeasedTask[], error?: Error): void {
    if (waiter.done) return;
    if (waiter.claiming) {
      waiter.wantsOut = true;
      return;
    }
    waiter.done = true;
    clearTimeout(waiter.timer);
    this.#queue = this.#queue.filter((other) => other !== waiter);
    if (!waiter.arriving) this.#waitingCount--;
    this.#metrics?.waiting.set(this.#waitingCount);
    if (error === undefined) waiter.resolve(tasks);
    else waiter.reject(error);
  }

  /** A request whose first claim found nothing: it waits now, or leaves (waitMs 0, no place left). */
  #startWaiting(waiter: Waiter): void {
    if (waiter.request.waitMs === 0 || this.#stopped) return this.#leave(waiter, []);
    if (this.#waitingCount >= this.#options.maxWaiting) {
      this.#metrics?.refused.inc();
      return this.#leave(waiter, [], new TooManyWaiting(`${this.#waitingCount} lease requests are waiting already (WORKER_MAX_WAITING)`));
    }
    waiter.arriving = false;
    this.#waitingCount++;
    this.#metrics?.waiting.set(this.#waitingCount);
    waiter.timer = setTimeout(() => this.#leave(waiter, []), waiter.request.waitMs);
    // The next due task is looked up when the claim is over (#served); the peek finds leases that ran out.
    this.#schedulePeek(this.#options.peekMs ?? DEFAULT_PEEK_MS);
  }

  #serveSoon(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#serve();
    });
  }

  /**
   * Starts claims, up to CLAIMS_AT_ONCE at a time, each for the requests not in a claim yet,
   * oldest first: those that arrived (for all their types) and those that wait on a woken type
   * (for the woken ones). A request that waits is claimed for again only when a task of its types
   * fell due, not each time another request arrives. Requests that arrive and tasks that fall due
   * during a claim are served by the next one, which starts when a claim ends (SKIP LOCKED keeps
   * claims apart when CLAIMS_AT_ONCE allows several, or processes run side by side).
   */
  #serve(): void {
    while (!this.#stopped && this.#claims < CLAIMS_AT_ONCE) {
      const woken = new Set(this.#woken);
      const group: Waiter[] = [];
      let asked = 0;
      for (const waiter of this.#queue) {
        if (waiter.done || waiter.claiming) continue;
        if (!waiter.arriving && ![...waiter.types].some((type) => woken.has(type))) continue;
        if (asked > 0 && asked + waiter.request.max > CLAIM_AT_MOST) break; // the next claim serves the rest
        asked += waiter.request.max;
        group.push(waiter);
      }
      for (const waiter of group) waiter.claiming = true;
      // A woken type is this claim's when it serves every waiting request of the type not in a
      // claim yet. It stays woken while requests of it wait for a claim that had started before it woke.
      for (const type of woken) {
        const wanted = this.#queue.filter((waiter) => !waiter.done && !waiter.arriving && waiter.types.has(type));
        const covered = group.some((waiter) => waiter.types.has(type));
        if (wanted.every((waiter) => waiter.claiming) && (covered || wanted.length === 0)) this.#woken.delete(type);
      }
      if (group.length === 0) return;
      this.#claims++;
      void this.#claim(group, woken)
        .then(
          (answer) => this.#served(group, answer),
          (error: unknown) => this.#served(group, undefined, error instanceof Error ? error : new Error(String(error))),
        )
        .finally(() => {
          this.#claims--;
          this.#serveSoon();
        });
    }
  }

  /**
   * A claim is over: who got tasks leaves with them; arriving requests that got none start to
   * wait. A claim that lost its rows to another transaction through every try (`failed` a lock
   * conflict: another process leased them) fails no request: they all wait, and claim again
   * after 10–60 ms (random, so two processes fall out of step).
   */
  #served(group: readonly Waiter[], answer: Claimed | undefined, failed?: Error): void {
    const lost = failed !== undefined && isLockConflict(failed);
    const refused = lost ? undefined : failed;
    group.forEach((waiter, i) => {
      waiter.claiming = false;
      const tasks = answer?.leased[i] ?? [];
      // A request whose time ran out during the claim still gets what it claimed: a little
      // late, rather than tasks leased to nobody until their lease runs out.
      if (tasks.length > 0 || waiter.wantsOut) this.#leave(waiter, tasks);
      else if (waiter.arriving) {
        if (refused !== undefined) this.#leave(waiter, [], refused);
        else this.#startWaiting(waiter);
      }
    });
    const left = new Set(group.filter((waiter) => !waiter.done).flatMap((waiter) => [...waiter.types]));
    if (lost) {
      this.#metrics?.conflicts.inc();
      this.#options.log.debug('pull: a claim lost its rows to another transaction; claiming again shortly');
      if (left.size > 0) this.#wakeAt(this.#options.clock.now() + 10 + Math.random() * 50, [...left]);
      return;
    }
    if (refused !== undefined) {
      this.#options.log.warn({ err: loggable(refused) }, 'pull: a lease for waiting workers failed; trying again at the next peek');
      return;
    }
    // A lock that came back full: more of those types may be due.
    for (const type of answer!.more) this.#woken.add(type);
    // Requests of this claim wait on: woken when their types' next task falls due (the claim's
    // look ahead), whoever armed it (this process's timers tell too, but may be busy; another
    // process's never do). The timer was set when the lock answered; an instant that passed
    // during the claim found these requests in it, so it wakes them now.
    // Not a type held back (paused, at its maxConcurrency): its next task would be no use; the peek looks again.
    for (const type of [...answer!.more, ...answer!.held]) left.delete(type);
    for (const { types, at } of answer!.upcoming) {
      const waking = types.filter((type) => left.has(type));
      if (waking.length > 0) this.#wakeAt(at, waking);
    }
  }

  /** One claim for `group` (oldest first), each request for its types not paused: all of them when it arrives, else those among `woken`. */
  async #claim(group: readonly Waiter[], woken: ReadonlySet<string>): Promise<Claimed> {
    const { limits, lifecycle, clock } = this.#options;
    const start = clock.now();
    const held = new Set<string>();
    const asks = group.map((waiter) => ({
      types: waiter.request.types.filter((type) => {
        const paused = limits.control(type)?.paused === true;
        if (paused) held.add(type);
        return (waiter.arriving || woken.has(type)) && !paused;
      }),
      max: waiter.request.max,
      leaseMs: waiter.request.leaseMs,
      token: newPullToken(),
    }));
    if (asks.every((ask) => ask.types.length === 0)) return { leased: asks.map(() => []), more: new Set(), held, upcoming: [] };
    this.#metrics?.claims.inc();
    const upcoming: Upcoming[] = [];
    const { leased, more, expired } = await lifecycle.leaseMany(
      asks,
      async (type, leasedOf) => {
        const max = limits.control(type)?.maxConcurrency;
        if (max == null) return undefined;
        const room = max - (await leasedOf());
        if (room <= 0) held.add(type);
        return room;
      },
      (types, at) => {
        // Before the COMMIT: a task due during this claim is woken at its instant, and the next
        // claim, which starts when this one ends, serves it.
        upcoming.push({ types, at });
        if (!this.#stopped) this.#wakeAt(at, types);
      },
    );
    for (const task of expired) this.#options.onExpired?.(task, start);
    return {
      leased: leased.map((tasks, i) =>
        tasks.map((task) => {
          this.#metrics?.leased.inc({ type: task.type });
          return { task, leaseToken: asks[i]!.token, leaseUntil: start + asks[i]!.leaseMs };
        }),
      ),
      more,
      held,
      upcoming,
    };
  }

  /** Looks up when the waiting requests' types next have a task due, in `delayMs`. */
  #schedulePeek(delayMs: number): void {
    if (this.#stopped) return;
    if (this.#peekTimer !== undefined && delayMs > 0) return;
    clearTimeout(this.#peekTimer);
    this.#peekTimer = setTimeout(() => {
      this.#peekTimer = undefined;
      void this.#peek();
    }, delayMs);
  }

  async #peek(): Promise<void> {
    if (this.#waitingCount === 0 || this.#stopped) return;
    const { pulls, log } = this.#options;
    const types = [...new Set(this.#queue.filter((waiter) => !waiter.arriving).flatMap((waiter) => [...waiter.types]))];
    try {
      const next = await pulls.nextAt(types);
      if (next !== undefined) this.#wakeAt(next, types);
    } catch (error) {
      log.warn({ err: loggable(error) }, 'pull: could not look up the next due task');
    }
    const peekMs = this.#options.peekMs ?? DEFAULT_PEEK_MS;
    if (this.#waitingCount > 0) this.#schedulePeek(peekMs);
  }

  /** A timer at `at` that wakes `types` (one timer: the earliest wins). */
  #wakeAt(at: number, types: readonly string[]): void {
    const delay = at - this.#options.clock.now();
    if (delay <= 0) {
      for (const type of types) this.#woken.add(type);
      this.#serveSoon();
      return;
    }
    // The earlier timer wakes these types too: a claim that comes early for them leases nothing
    // before its time (run_at <= now), and looks ahead again.
    for (const type of types) this.#dueTypes.add(type);
    if (at >= this.#dueAt) return;
    clearTimeout(this.#dueTimer);
    this.#dueAt = at;
    this.#dueTimer = setTimeout(
      () => {
        this.#dueAt = Number.POSITIVE_INFINITY;
        const woken = [...this.#dueTypes];
        this.#dueTypes.clear();
        // Never early by the wall clock: a timer that woke before `at` sleeps again (invariant 2).
        if (this.#options.clock.now() < at) return this.#wakeAt(at, woken);
        for (const type of woken) this.#woken.add(type);
        this.#serveSoon();
      },
      Math.min(delay, 2 ** 31 - 1),
    );
  }
}
