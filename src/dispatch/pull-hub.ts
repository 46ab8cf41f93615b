/**
 * The pull hub: where pull workers' lease requests wait (long poll) until a task of their types
 * falls due, and the one place that leases to them. A request is answered at once when due tasks
 * are there; otherwise it waits, FIFO, until a task of its types falls due or its `waitMs` passes
 * (then it gets no task). Waiting costs a bounded amount of memory: at most `maxWaiting` requests
 * wait in this process, one more is refused at once; a request whose client went away leaves the
 * queue; a stop answers every waiting request at once, with no task.
 *
 * How a waiting worker hears of a due task:
 * - this process's timers (the scheduler arms worker tasks like any other): the dispatcher hands
 *   the due tasks of worker types here after its batch (`due`), within a few ms of their runAt;
 * - a peek at the table, while requests wait: when the next task of their types falls due or a
 *   lease of theirs runs out, read every `peekMs`, and a timer set at that instant. It finds what
 *   another process armed (SHARDING=on: a task of a shard this process does not own) and what
 *   other processes created meanwhile.
 *
 * Fair: the longest waiting request whose types match is served first, and a served request leaves
 * the queue. Leases are conditional claims in the database (pull.ts), so two workers, in this
 * process or in two, never get one task. Paused types are not leased; a type's maxConcurrency counts
 * the leases held across the fleet. See docs/workers.md.
 */
import type { Logger } from 'pino';
import { randomBytes } from 'node:crypto';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '../time/clock.js';
import { loggable } from '../db/errors.js';
import type { PullLifecycle } from '../lifecycle/pull.js';
import type { PullStore } from '../store/pulls.js';
import type { Task } from '../store/task-store.js';
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
  /** How often waiting requests' types are looked up in the table (what other processes armed or created). */
  peekMs?: number;
  registry?: Registry;
}

interface Waiter {
  request: LeaseRequest;
  types: ReadonlySet<string>;
  resolve: (tasks: LeasedTask[]) => void;
  timer: NodeJS.Timeout;
  done: boolean;
  /** A claim for it is under way: it leaves when the claim is over, with what it got. */
  claiming: boolean;
  /** Its time ran out or its client went away during a claim. */
  wantsOut: boolean;
}

const DEFAULT_PEEK_MS = 1000;

export class PullHub {
  readonly #options: PullHubOptions;
  /** Waiting requests, oldest first. */
  #waiting: Waiter[] = [];
  /** Types with a task due since the last serve. */
  readonly #woken = new Set<string>();
  #serving = false;
  #stopped = false;
  #peekTimer: NodeJS.Timeout | undefined;
  #dueTimer: NodeJS.Timeout | undefined;
  #dueAt = Number.POSITIVE_INFINITY;
  readonly #metrics: { leased: Counter; waiting: Gauge; refused: Counter } | undefined;

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
      };
    }
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Leases due tasks of `request.types` now, or waits for one up to `request.waitMs`; `signal`
   * aborts the wait (the client went away). Throws TooManyWaiting when no place is left.
   */
  async lease(request: LeaseRequest, signal?: AbortSignal): Promise<LeasedTask[]> {
    const now = await this.#claim(request);
    if (now.length > 0 || request.waitMs === 0 || this.#stopped || signal?.aborted === true) return now;
    if (this.#waiting.length >= this.#options.maxWaiting) {
      this.#metrics?.refused.inc();
      throw new TooManyWaiting(`${this.#waiting.length} lease requests are waiting already (WORKER_MAX_WAITING)`);
    }
    return new Promise<LeasedTask[]>((resolve) => {
      const waiter: Waiter = {
        request,
        types: new Set(request.types),
        resolve,
        done: false,
        claiming: false,
        wantsOut: false,
        timer: setTimeout(() => this.#leave(waiter, []), request.waitMs),
      };
      signal?.addEventListener('abort', () => this.#leave(waiter, []), { once: true });
      this.#waiting.push(waiter);
      this.#metrics?.waiting.set(this.#waiting.length);
      // What fell due between the first claim and now, and what the table says comes next.
      for (const type of request.types) this.#woken.add(type);
      this.#serveSoon();
      this.#schedulePeek(0);
    });
  }

  /** Tasks of worker types fell due (the dispatcher, after its batch): the waiting requests of their types are served. */
  due(tasks: readonly Task[]): void {
    if (this.#stopped || this.#waiting.length === 0) return;
    for (const task of tasks) this.#woken.add(task.type);
    this.#serveSoon();
  }

  /** Answers every waiting request at once, with no task; later requests get none either. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#peekTimer);
    clearTimeout(this.#dueTimer);
    for (const waiter of [...this.#waiting]) this.#leave(waiter, []);
  }

  #leave(waiter: Waiter, tasks: LeasedTask[]): void {
    if (waiter.done) return;
    if (waiter.claiming) {
      waiter.wantsOut = true;
      return;
    }
    waiter.done = true;
    clearTimeout(waiter.timer);
    this.#waiting = this.#waiting.filter((other) => other !== waiter);
    this.#metrics?.waiting.set(this.#waiting.length);
    waiter.resolve(tasks);
  }

  async #claim(request: LeaseRequest): Promise<LeasedTask[]> {
    if (this.#stopped) return [];
    const { limits, lifecycle, clock } = this.#options;
    const types = request.types.filter((type) => limits.control(type)?.paused !== true);
    if (types.length === 0) return [];
    const token = `pull:${randomBytes(18).toString('base64url')}`;
    const start = clock.now();
    const tasks = await lifecycle.lease({
      types,
      max: request.max,
      leaseMs: request.leaseMs,
      token,
      room: async (type, leasedOf) => {
        const max = limits.control(type)?.maxConcurrency;
        return max == null ? undefined : max - (await leasedOf());
      },
    });
    for (const task of tasks) this.#metrics?.leased.inc({ type: task.type });
    return tasks.map((task) => ({ task, leaseToken: token, leaseUntil: start + request.leaseMs }));
  }

  #serveSoon(): void {
    if (this.#serving) return;
    this.#serving = true;
    setImmediate(() => void this.#serve());
  }

  /** Serves the waiting requests of the woken types, oldest first, until those types have nothing due left. */
  async #serve(): Promise<void> {
    try {
      while (this.#woken.size > 0 && !this.#stopped) {
        const woken = new Set(this.#woken);
        this.#woken.clear();
        for (const waiter of [...this.#waiting]) {
          if (woken.size === 0) break;
          if (waiter.done || ![...waiter.types].some((type) => woken.has(type))) continue;
          waiter.claiming = true;
          let tasks: LeasedTask[] = [];
          let failed: Error | undefined;
          try {
            tasks = await this.#claim({ ...waiter.request, types: waiter.request.types.filter((type) => woken.has(type)) });
          } catch (error) {
            failed = error instanceof Error ? error : new Error(String(error));
          }
          waiter.claiming = false;
          // A waiter whose time ran out during the claim still gets what it claimed: a little
          // late, rather than tasks leased to nobody until their lease runs out.
          if (tasks.length > 0 || waiter.wantsOut) this.#leave(waiter, tasks);
          if (failed !== undefined) throw failed;
          // Fewer than asked: nothing more of those types is due now.
          if (tasks.length < waiter.request.max) for (const type of waiter.request.types) woken.delete(type);
          else for (const type of waiter.request.types) this.#woken.add(type);
        }
      }
    } catch (error) {
      this.#options.log.warn({ err: loggable(error) }, 'pull: a lease for waiting workers failed; trying again at the next peek');
    } finally {
      this.#serving = false;
      if (this.#woken.size > 0 && !this.#stopped) this.#serveSoon();
    }
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
    if (this.#waiting.length === 0 || this.#stopped) return;
    const { pulls, log } = this.#options;
    const types = [...new Set(this.#waiting.flatMap((waiter) => [...waiter.types]))];
    try {
      const next = await pulls.nextAt(types);
      if (next !== undefined) this.#wakeAt(next, types);
    } catch (error) {
      log.warn({ err: loggable(error) }, 'pull: could not look up the next due task');
    }
    const peekMs = this.#options.peekMs ?? DEFAULT_PEEK_MS;
    if (this.#waiting.length > 0) this.#schedulePeek(peekMs);
  }

  /** A timer at `at` that wakes `types` (one timer: the earliest wins). */
  #wakeAt(at: number, types: readonly string[]): void {
    const delay = at - this.#options.clock.now();
    if (delay <= 0) {
      for (const type of types) this.#woken.add(type);
      this.#serveSoon();
      return;
    }
    if (at >= this.#dueAt) return;
    clearTimeout(this.#dueTimer);
    this.#dueAt = at;
    this.#dueTimer = setTimeout(
      () => {
        this.#dueAt = Number.POSITIVE_INFINITY;
        // Never early by the wall clock: a timer that woke before `at` sleeps again (invariant 2).
        if (this.#options.clock.now() < at) return this.#wakeAt(at, types);
        for (const type of types) this.#woken.add(type);
        this.#serveSoon();
      },
      Math.min(delay, 2 ** 31 - 1),
    );
  }
}
