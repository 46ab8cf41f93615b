/**
 * GET and POST /test/clock: the test clock a shop's CI moves (app/test-clock.ts does the moving).
 * Without TEST_CLOCK=on the routes answer 404 with the way to turn it on, so a production service
 * never has a clock anyone can move. Bad input is a 400 that moves nothing.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorJson } from '../../contract/errors.js';
import { DEFAULT_ADVANCE_WAIT_MS, TestClockBody, TestClockJson } from '../../contract/test-clock.js';
import { parseRunAt, TimeInputError } from '../../time/zones.js';
import { zoneOf } from '../create-input.js';
import { badRequest, HttpError } from '../errors.js';
import { storedInstant } from '../instants.js';

export interface AdvanceResult {
  now: number;
  settled: boolean;
  steps: number;
  running: number[];
  held: number;
}

/** What the routes need of the test clock; undefined when the mode is off. */
export interface TestClockControl {
  now(): number;
  /** Moves the clock to `to`, running what falls due on the way; waits up to `waitMs` for it to finish. */
  advance(to: number, waitMs: number): Promise<AdvanceResult>;
}

export interface TestClockRoutesOptions {
  control: TestClockControl | undefined;
  /** TIMEZONE: the zone of a naive `to`. */
  timezone: string;
}

const OFF_MESSAGE =
  'the test clock is off: start punctual with --test-clock (or TEST_CLOCK=on) on a database of its own, never in production';

function clockJson(now: number, result?: AdvanceResult): TestClockJson {
  const base = { testClock: true, now: new Date(now).toISOString(), nowMs: now };
  if (result === undefined) return base;
  return { ...base, settled: result.settled, steps: result.steps, running: result.running, held: result.held };
}

export const testClockRoutes: FastifyPluginAsync<TestClockRoutesOptions> = async (plain, options) => {
  const app = plain.withTypeProvider<TypeBoxTypeProvider>();
  const { control } = options;
  const responses = { 200: TestClockJson, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson, 404: ErrorJson };
  const on = (): TestClockControl => {
    if (control === undefined) throw new HttpError(404, 'PUNCTUAL_TEST_CLOCK_OFF', OFF_MESSAGE);
    return control;
  };

  app.get(
    '/test/clock',
    { schema: { summary: "The test clock's time (TEST_CLOCK=on only)", tags: ['test clock'], response: responses } },
    async () => clockJson(on().now()),
  );

  app.post(
    '/test/clock',
    {
      schema: {
        summary: 'Move the test clock forward and run what falls due (TEST_CLOCK=on only)',
        description:
          'Steps from one due instant to the next up to the target: at each, the tasks due run and settle (retries whose backoff lands inside the window too), then the clock moves on. Answers once they have run, or after waitMs with the ids still running.',
        tags: ['test clock'],
        body: TestClockBody,
        response: responses,
      },
    },
    async (request) => {
      const clock = on();
      const { advanceMs, to, timezone, waitMs } = request.body;
      if ((advanceMs === undefined) === (to === undefined))
        throw badRequest('body/advanceMs', 'or body/to is required, exactly one of the two');
      const now = clock.now();
      let target: number;
      if (advanceMs !== undefined) {
        if (timezone !== undefined) throw badRequest('body/timezone', 'goes with body/to, not with body/advanceMs');
        target = storedInstant('body/advanceMs', now + advanceMs);
      } else {
        const zone = zoneOf(timezone, options.timezone);
        try {
          target = storedInstant('body/to', parseRunAt(to!, zone, now));
        } catch (error) {
          if (error instanceof TimeInputError) throw badRequest('body/to', error.message);
          throw error;
        }
        if (target < now)
          throw badRequest('body/to', `is before the test clock's time ${new Date(now).toISOString()}: the clock only moves forward`);
      }
      const result = await clock.advance(target, waitMs ?? DEFAULT_ADVANCE_WAIT_MS);
      return clockJson(result.now, result);
    },
  );
};
