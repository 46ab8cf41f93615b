/**
 * The test clock (TEST_CLOCK=on, `punctual start --test-clock`, createPunctual's `clock`): time
 * moves only when a shop's test says, and an advance runs, in due order, everything that falls due
 * on the way before it answers, so the test asserts right after.
 *
 * An advance steps: it reads the next instant after now at which something falls due (a pending
 * task's runAt, a running task's lease end), moves the clock there, hands over what is due (the
 * timers re-armed against the new time, a reconcile and a refill, the pull hub and the limits woken)
 * and waits until it has settled; then on to the next instant, until the target. A retry whose
 * backoff lands inside the window, a cron's next occurrence, a lease that ends: each is an instant
 * the next read finds. "Settled": no timer due, nothing queued or running in the dispatcher, and
 * every pending task due by now is held on purpose (its type paused, a worker type not pulled
 * yet). A task waiting for room under a limit is not held: its room frees as the runs before it
 * end, so the move waits for it too. What is still unfinished after `waitMs` is named in the answer.
 *
 * Never in production by accident: a start with the test clock marks its database (punctual_meta)
 * and refuses one that holds tasks without the mark; a start without it takes the mark away.
 */
import type { Logger } from 'pino';
import type { ManualClock } from '../time/clock-manual.js';
import type { TestClockStore } from '../store/test-clock.js';
import type { Timers } from '../timers/timers.js';
import type { DueQueue } from '../timers/due-queue.js';
import type { Scheduler } from '../timers/scheduler.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import type { PullHub } from '../dispatch/pull-hub.js';
import type { TypeAdmission } from '../dispatch/limits.js';
import type { AdvanceResult, TestClockControl } from '../http/routes/test-clock.js';
import { sleep } from '../util/async.js';

/** A start with the test clock on a database that holds tasks made without it. */
export class TestClockRefused extends Error {
  override name = 'TestClockRefused';
}

/** How often (real time) the settle looks again. */
const SETTLE_POLL_MS = 2;
/** Due rows that no timer holds after this long (real time) are armed again by a catch-up. */
const CATCH_UP_AGAIN_MS = 200;

export interface TestClockParts {
  clock: ManualClock;
  store: TestClockStore;
  timers: Timers;
  queue: DueQueue;
  scheduler: Scheduler;
  dispatcher: Dispatcher;
  pullHub: PullHub;
  limits: TypeAdmission;
  /** Whether tasks of `type` are held when due: a worker type waits to be pulled. */
  pulled: (type: string) => boolean;
  log: Logger;
}

export class TestClock implements TestClockControl {
  readonly #parts: TestClockParts;
  /** Advances run one at a time: a second waits for the first. */
  #turn: Promise<unknown> = Promise.resolve();

  constructor(parts: TestClockParts) {
    this.#parts = parts;
  }

  now(): number {
    return this.#parts.clock.now();
  }

  /**
   * At start, before the boot load: refuses a database with tasks made without the test clock
   * (TestClockRefused), and marks an empty one.
   */
  static async claim(store: TestClockStore, database: string): Promise<void> {
    if (await store.marked()) return;
    const tasks = await store.taskCount();
    if (tasks > 0) {
      throw new TestClockRefused(
        `TEST_CLOCK=on: the database ${database} holds ${tasks >= 1000 ? '1000 or more' : tasks} task(s) made without the test clock; ` +
          'the test clock runs only on a database of its own (an empty one, or one a test-clock start made): point DATABASE_URL at another database',
      );
    }
    await store.mark();
  }

  /** At a start without the test clock: the database is in real use from now on. */
  static async release(store: TestClockStore, log: Logger): Promise<void> {
    if (await store.unmark())
      log.warn('this database was used with the test clock: it runs on the real clock now, and a test-clock start will refuse it');
  }

  advance(to: number, waitMs: number): Promise<AdvanceResult> {
    const run = this.#turn.then(() => this.#advance(to, waitMs));
    this.#turn = run.catch(() => undefined);
    return run;
  }

  async #advance(to: number, waitMs: number): Promise<AdvanceResult> {
    const { clock, store, log } = this.#parts;
    const deadline = performance.now() + waitMs;
    let steps = 0;
    let settled: boolean;
    const from = clock.now();
    for (;;) {
      const next = await store.nextAfter(clock.now());
      const at = next !== undefined && next < to ? next : Math.max(to, clock.now());
      clock.set(at);
      if (at < to) steps++;
      await this.#handOver();
      settled = await this.#settle(deadline);
      if (at >= to || !settled) break;
    }
    if (clock.now() < to) {
      // Out of time waiting at a step: the clock still goes where it was asked; what runs is named.
      clock.set(to);
      await this.#handOver();
      settled = await this.#settle(performance.now());
    }
    const held = await this.#held();
    const running = settled ? [] : await this.#unfinished();
    log.info({ from: new Date(from).toISOString(), to: new Date(to).toISOString(), steps, settled, running }, 'test clock advanced');
    return { now: clock.now(), settled, steps, running, held };
  }

  /** What the new time made due goes to the dispatcher, the pull hub and the limits now. */
  async #handOver(): Promise<void> {
    const { timers, scheduler, pullHub, limits } = this.#parts;
    timers.rearmAll();
    await scheduler.followClock();
    pullHub.clockMoved();
    limits.wakeAll();
  }

  /** Waits until what is due by now has run (see the header), up to `deadline`; answers whether it did. */
  async #settle(deadline: number): Promise<boolean> {
    const { timers, queue, dispatcher, clock } = this.#parts;
    let lastCatchUp = performance.now();
    for (;;) {
      await sleep(SETTLE_POLL_MS);
      const busy = timers.dueCount() > 0 || queue.length > 0 || !dispatcher.idle;
      if (!busy && (await this.#runnableDue(clock.now())) === 0) return true;
      if (performance.now() >= deadline) return false;
      if (!busy && performance.now() - lastCatchUp >= CATCH_UP_AGAIN_MS) {
        // Due rows nothing holds: a write that raced the last catch-up. Arm them again.
        lastCatchUp = performance.now();
        await this.#handOver();
      }
    }
  }

  /**
   * Pending tasks due by `now` that nothing holds back on purpose (not paused, not a worker type's).
   * Those waiting for room under a limit count: their room frees as the runs before them end.
   */
  async #runnableDue(now: number): Promise<number> {
    const { store, limits, pulled } = this.#parts;
    let due = 0;
    for (const [type, count] of await store.dueByType(now)) {
      if (!pulled(type) && limits.control(type)?.paused !== true) due += count;
    }
    return due;
  }

  /**
   * The tasks still running: those marked running (an outside handler, a pull worker's lease), and
   * the due ones nothing holds back, which a database handler runs in a transaction not yet committed.
   */
  async #unfinished(): Promise<number[]> {
    const { store, limits, pulled, clock } = this.#parts;
    const due = (await store.dueIds(clock.now())).filter(({ type }) => !pulled(type) && limits.control(type)?.paused !== true);
    return [...new Set([...(await store.running()), ...due.map(({ id }) => id)])].sort((a, b) => a - b);
  }

  /** Pending tasks due by now that are held back. */
  async #held(): Promise<number> {
    let due = 0;
    for (const count of (await this.#parts.store.dueByType(this.#parts.clock.now())).values()) due += count;
    return due - (await this.#runnableDue(this.#parts.clock.now()));
  }
}
