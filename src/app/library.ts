/**
 * punctual as a library: `import { createPunctual } from 'punctual'`, for a Node shop that keeps
 * its handlers in its own repository (graphile-worker's run()). The same service as `npm start`:
 * the configuration is the environment's variables as an object (read and checked by the same
 * table, docs/configuration.md), `handlers` the same plain objects a handler module exports.
 * Nothing here reads process.env or installs signal handlers: the host program owns the process.
 */
import type { Logger } from 'pino';
import type { TSchema } from 'typebox';
import type { HandlerDefinition } from '../contract/handler-module.js';
import { loadConfig } from './config.js';
import { DEFAULT_ADVANCE_WAIT_MS } from '../contract/test-clock.js';
import type { VariableName } from './config-table.js';
import { Service } from './service.js';
import { ManualClock } from '../time/clock-manual.js';

export { defineHandler, PermanentFailure } from '../contract/handler-module.js';
export type * from '../contract/handler-module.js';
export { ConfigError } from './config.js';
export { HandlerModuleError } from '../handlers/modules.js';
export { ProcedureError } from '../handlers/procedure.js';
export { ManualClock } from '../time/clock-manual.js';
export { TestClockRefused } from './test-clock.js';

/** The configuration by variable name (`DATABASE_URL`, `PORT`, …), plus the shop's handlers. */
export type PunctualOptions = { [Name in VariableName]?: string | number | boolean } & {
  /** Handlers as plain objects ({ type, effect, payload, run }); defineHandler types them. */
  handlers?: readonly HandlerDefinition<TSchema>[];
  /** A pino logger of the host program's; default punctual's own JSON log on stdout. */
  logger?: Logger;
  /**
   * A clock for the shop's in-process tests: the service runs on it as on the test clock
   * (TEST_CLOCK=on, implied), and `advance`/`setTime` move it, running what falls due.
   */
  clock?: ManualClock;
};

/** After an advance: whether what fell due has finished, and what still runs. */
export interface Advanced {
  /** The clock's time now, epoch ms. */
  now: number;
  /** Every task due by now finished (or is held: a paused type, a worker type). */
  settled: boolean;
  /** The due instants the clock stopped at on its way. */
  steps: number;
  /** Ids of the tasks still running. */
  running: number[];
  /** Tasks due but held back. */
  held: number;
}

export interface Punctual {
  /** Loads the handlers, listens, migrates, arms the pending tasks; answers the URL it serves. */
  start(): Promise<string>;
  /** The clean stop (running handlers finish, up to STOP_TIMEOUT_MS). Safe to call twice. */
  stop(): Promise<void>;
  /** Where it listens, once started (`http://127.0.0.1:3000`); undefined before. */
  readonly url: string | undefined;
  /** On the test clock: its time in epoch ms (else the wall clock's). */
  now(): number;
  /** On the test clock: moves it `ms` forward, running in due order what falls due; resolves once that has run. */
  advance(ms: number, options?: { waitMs?: number }): Promise<Advanced>;
  /** On the test clock: moves it to `at` (epoch ms or a Date, never back), as advance does. */
  setTime(at: number | Date, options?: { waitMs?: number }): Promise<Advanced>;
}

/** A punctual service. A bad setting throws a ConfigError naming the variable, at once. */
export function createPunctual(options: PunctualOptions = {}): Punctual {
  const { handlers, logger, clock, ...settings } = options;
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(settings)) if (value !== undefined) env[name] = String(value);
  if (clock !== undefined) env.TEST_CLOCK = 'on';
  const service = new Service(loadConfig(env), { handlers, logger, clock });
  let url: string | undefined;
  const moveTo = (at: number, waitMs = DEFAULT_ADVANCE_WAIT_MS): Promise<Advanced> => {
    const testClock = service.testClock;
    if (testClock === undefined)
      return Promise.reject(new Error('the test clock is off: pass a ManualClock as `clock`, or TEST_CLOCK: "on"'));
    if (!Number.isSafeInteger(at) || at < testClock.now())
      return Promise.reject(new RangeError(`the test clock only moves forward, to an integer of epoch ms; got ${at}`));
    return testClock.advance(at, waitMs);
  };
  return {
    async start() {
      url = await service.start();
      return url;
    },
    stop: () => service.stop(),
    get url() {
      return url;
    },
    now: () => service.testClock?.now() ?? Date.now(),
    advance: (ms, advanceOptions) =>
      Number.isSafeInteger(ms) && ms >= 0
        ? moveTo((service.testClock?.now() ?? 0) + ms, advanceOptions?.waitMs)
        : Promise.reject(new RangeError(`advance takes a whole number of ms, 0 or more; got ${ms}`)),
    setTime: (at, advanceOptions) => moveTo(at instanceof Date ? at.getTime() : at, advanceOptions?.waitMs),
  };
}
