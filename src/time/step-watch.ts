/**
 * Watches for steps of the wall clock (invariant 10: the wall clock may step). Every
 * CHECK_INTERVAL_MS it compares how far the wall clock and the monotonic clock moved; a difference
 * above STEP_THRESHOLD_MS is a step: logged and counted, every armed timer set again from its runAt
 * (the overdue ones handed to the dispatcher at once), and a refill at once. A freeze moves both
 * clocks alike: no step, only the refill is pulled forward.
 * See docs/architecture.md#clock-steps.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from './clock.js';

/** How often the clocks are compared: a step is noticed within this long. */
export const CHECK_INTERVAL_MS = 250;
/** A difference between the two clocks' progress above this is a step (documented in the README). */
export const STEP_THRESHOLD_MS = 25;
/** The monotonic clock moved this much more than CHECK_INTERVAL_MS: the process was frozen or blocked. */
export const WAKE_LATE_MS = 1000;
/** Readings taken further apart than this (the thread was preempted) are taken again. */
const MAX_READ_SPREAD_MS = 2;

/** What the watch saw: steps, their last size, and late wake-ups. */
export class StepWatchMetrics {
  readonly clockSteps: Counter;
  readonly lateWakeups: Counter;
  readonly clockLastStep: Gauge;

  constructor(registry: Registry) {
    this.clockSteps = new Counter({
      name: 'punctual_clock_steps_total',
      help: `Steps of the wall clock noticed (its progress differed from the monotonic clock's by more than ${STEP_THRESHOLD_MS} ms); each re-armed the timers.`,
      registers: [registry],
    });
    this.lateWakeups = new Counter({
      name: 'punctual_clock_late_wakeups_total',
      help: 'Times the process woke up late (it was frozen or its event loop blocked) and refilled at once.',
      registers: [registry],
    });
    this.clockLastStep = new Gauge({
      name: 'punctual_clock_last_step_seconds',
      help: 'Size of the last wall-clock step: positive forward, negative backward (0 before any).',
      registers: [registry],
    });
  }
}

export interface StepWatchOptions {
  clock: Clock;
  log: Logger;
  metrics?: StepWatchMetrics;
  /** Sets every armed timer again from its runAt; hands the overdue ones over. Answers how many were due. */
  timers: { rearmAll(): number };
  /** Moves the horizon to the new time at once; refills now. */
  scheduler: { followClockStep(stepMs: number): void; refillSoon(): void };
  /** The monotonic clock in ms; the global performance.now by default (looked up per call, so tests can fake it). */
  monotonic?: () => number;
}

interface Reading {
  wall: number;
  mono: number;
}

export class StepWatch {
  readonly #options: StepWatchOptions;
  readonly #monotonic: () => number;
  #last: Reading | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: StepWatchOptions) {
    this.#options = options;
    this.#monotonic = options.monotonic ?? (() => performance.now());
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#last = this.#read();
    this.#timer = setInterval(() => this.check(), CHECK_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Safe to call twice. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#last = undefined;
  }

  /**
   * Compares the clocks' progress since the last check and acts on a step or a late wake-up.
   * Runs on its own interval; public for tests. Answers the step in ms (0 when there was none).
   */
  check(): number {
    const previous = this.#last;
    const now = this.#read();
    this.#last = now;
    if (previous === undefined) return 0;
    const monoMoved = now.mono - previous.mono;
    const stepMs = Math.round(now.wall - previous.wall - monoMoved);
    if (Math.abs(stepMs) > STEP_THRESHOLD_MS) {
      this.#stepped(stepMs, now.wall);
      return stepMs;
    }
    if (monoMoved > CHECK_INTERVAL_MS + WAKE_LATE_MS) {
      this.#options.log.info(
        { gapMs: Math.round(monoMoved) },
        'woke up late (the process was frozen or its event loop blocked): refilling now',
      );
      this.#options.metrics?.lateWakeups.inc();
      this.#options.scheduler.refillSoon();
    }
    return 0;
  }

  #stepped(stepMs: number, wall: number): void {
    const { log, metrics, timers, scheduler } = this.#options;
    metrics?.clockSteps.inc();
    metrics?.clockLastStep.set(stepMs / 1000);
    const overdue = timers.rearmAll();
    scheduler.followClockStep(stepMs);
    log.warn(
      { stepMs, direction: stepMs > 0 ? 'forward' : 'backward', now: new Date(wall).toISOString(), overdue },
      'wall clock stepped: timers re-armed from their runAt',
    );
  }

  /** The wall clock and the monotonic clock, read as close together as the thread allows. */
  #read(): Reading {
    let best: Reading | undefined;
    let bestSpread = Number.POSITIVE_INFINITY;
    for (let tries = 0; tries < 5; tries++) {
      const before = this.#monotonic();
      const wall = this.#options.clock.now();
      const after = this.#monotonic();
      const spread = after - before;
      if (spread < bestSpread) {
        best = { wall, mono: (before + after) / 2 };
        bestSpread = spread;
      }
      if (spread <= MAX_READ_SPREAD_MS) break;
    }
    return best!;
  }
}
