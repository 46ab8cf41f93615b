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

const DEFAULT_PEEK_MS = 1000;
/** The most tasks one claim asks for (the sum of its requests' `max`); the other requests are served by the next. */
const CLAIM_AT_MOST = 1000;

export class PullHub {
  readonly #options: PullHubOptions;
  /** Requests, oldest first: those that wait, and those arriving (before their first claim). */
  #queue: Waiter[] = [];
  /** How many of the queue wait (past their first claim). */
  #waitingCount = 0;
  /** Types with a task due (or a request arrived for them) since the last claim. */
  readonly #woken = new Set<string>();
  #serving = false;
  #stopped = false;
  #peekTimer: NodeJS.Timeout | undefined;
  #dueTimer: NodeJS.Timeout | undefined;
  #dueAt = Number.POSITIVE_INFINITY;
  readonly #metrics: { leased: Counter; waiting: Gauge; refused: Counter; claims: Counter } | undefined;

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
      };
    }
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
      for (const type of request.types) this.#woken.add(type);
      this.#serveSoon();
    });
  }

  /** Tasks of worker types fell due (the dispatcher, after its batch): the waiting requests of their types are served. */
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
    // A type no other request waits for: look at once when its next task falls due (another process's, or inserted).
    const fresh = [...waiter.types].some((type) => !this.#queue.some((other) => other !== waiter && !other.arriving && other.types.has(type)));
    waiter.arriving = false;
    this.#waitingCount++;
    this.#metrics?.waiting.set(this.#waitingCount);
    waiter.timer = setTimeout(() => this.#leave(waiter, []), waiter.request.waitMs);
    this.#schedulePeek(fresh ? 0 : this.#options.peekMs ?? DEFAULT_PEEK_MS);
  }

  #serveSoon(): void {
    if (this.#serving) return;
    this.#serving = true;
    setImmediate(() => void this.#serve());
  }

  /**
   * Serves the requests of the woken types, oldest first, one claim for all of them, until those
   * types have nothing due left. Requests that arrive or tasks that fall due during a claim are
   * served by the next one.
   */
  async #serve(): Promise<void> {
    try {
      while (this.#woken.size > 0 && !this.#stopped) {
        const woken = new Set(this.#woken);
        this.#woken.clear();
        const group: Waiter[] = [];
        let asked = 0;
        for (const waiter of this.#queue) {
          if (waiter.done || ![...waiter.types].some((type) => woken.has(type))) continue;
          if (asked > 0 && asked + waiter.request.max > CLAIM_AT_MOST) {
            for (const type of waiter.types) this.#woken.add(type); // the next claim serves it
            continue;
          }
          asked += waiter.request.max;
          group.push(waiter);
        }
        if (group.length === 0) continue;
        for (const waiter of group) waiter.claiming = true;
        let answer: { leased: LeasedTask[][]; more: Set<string> } | undefined;
        let failed: Error | undefined;
        try {
          answer = await this.#claim(group, woken);
        } catch (error) {
          failed = error instanceof Error ? error : new Error(String(error));
        }
        group.forEach((waiter, i) => {
          waiter.claiming = false;
          const tasks = answer?.leased[i] ?? [];
          // A request whose time ran out during the claim still gets what it claimed: a little
          // late, rather than tasks leased to nobody until their lease runs out.
          if (tasks.length > 0 || waiter.wantsOut) this.#leave(waiter, tasks);
          else if (waiter.arriving) {
            if (failed !== undefined) this.#leave(waiter, [], failed);
            else this.#startWaiting(waiter);
          }
        });
        if (failed !== undefined) {
          this.#options.log.warn({ err: loggable(failed) }, 'pull: a lease for waiting workers failed; trying again at the next peek');
          continue;
        }
        // A lock that came back full: more of those types may be due.
        for (const type of answer!.more) this.#woken.add(type);
      }
    } finally {
      this.#serving = false;
      if (this.#woken.size > 0 && !this.#stopped) this.#serveSoon();
    }
  }

  /** One claim for `group` (oldest first), each request for its types among `woken` that are not paused. */
  async #claim(group: readonly Waiter[], woken: ReadonlySet<string>): Promise<{ leased: LeasedTask[][]; more: Set<string> }> {
    const { limits, lifecycle, clock } = this.#options;
    const start = clock.now();
    const asks = group.map((waiter) => ({
      types: waiter.request.types.filter((type) => woken.has(type) && limits.control(type)?.paused !== true),
      max: waiter.request.max,
      leaseMs: waiter.request.leaseMs,
      token: `pull:${randomBytes(18).toString('base64url')}`,
    }));
    if (asks.every((ask) => ask.types.length === 0)) return { leased: asks.map(() => []), more: new Set() };
    this.#metrics?.claims.inc();
    const { leased, more } = await lifecycle.leaseMany(asks, async (type, leasedOf) => {
      const max = limits.control(type)?.maxConcurrency;
      return max == null ? undefined : max - (await leasedOf());
    });
    return {
      leased: leased.map((tasks, i) =>
        tasks.map((task) => {
          this.#metrics?.leased.inc({ type: task.type });
          return { task, leaseToken: asks[i]!.token, leaseUntil: start + asks[i]!.leaseMs };
        }),
      ),
      more,
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
