/**
 * The test clock (TEST_CLOCK=on, `punctual start --test-clock`): a shop's CI reads it and moves
 * it forward; every task due up to the new instant has run when an advance answers. Never on in
 * production: without the mode these routes answer 404.
 */
import { Type, type Static } from 'typebox';

/** Ten years, the furthest a create's runAt may lie ahead: one advance moves no further. */
export const MAX_ADVANCE_MS = 10 * 366 * 24 * 3600 * 1000;
/** How long an advance waits, by default, for what fell due to finish. */
export const DEFAULT_ADVANCE_WAIT_MS = 10_000;
export const MAX_ADVANCE_WAIT_MS = 600_000;

export const TestClockBody = Type.Object(
  {
    advanceMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_ADVANCE_MS,
        description: 'move the clock this many ms forward (exactly one of advanceMs and to)',
      }),
    ),
    to: Type.Optional(
      Type.Union([Type.String({ maxLength: 64 }), Type.Integer()], {
        description:
          'move the clock to this instant: ISO-8601 with an offset, a naive local time read in `timezone`, or epoch ms; never before now',
      }),
    ),
    timezone: Type.Optional(Type.String({ maxLength: 64, description: "the zone of a naive `to`; default the service's TIMEZONE" })),
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_ADVANCE_WAIT_MS,
        description: `how long (real time) to wait for the tasks that fell due to finish; default ${DEFAULT_ADVANCE_WAIT_MS}`,
      }),
    ),
  },
  { additionalProperties: false },
);
export type TestClockBody = Static<typeof TestClockBody>;

export const TestClockJson = Type.Object(
  {
    testClock: Type.Boolean({ description: 'always true: the service runs on the test clock' }),
    now: Type.String({ description: "the test clock's time, ISO-8601 UTC with milliseconds" }),
    nowMs: Type.Integer({ description: "the test clock's time in epoch milliseconds" }),
    settled: Type.Optional(
      Type.Boolean({
        description: 'after an advance: true when every task due by now has finished (or is held: a paused type, a worker type)',
      }),
    ),
    steps: Type.Optional(Type.Integer({ description: 'after an advance: the due instants the clock stopped at on its way' })),
    running: Type.Optional(
      Type.Array(Type.Integer(), { description: "after an advance: the tasks still running (a slow handler, a pull worker's lease)" }),
    ),
    held: Type.Optional(
      Type.Integer({ description: 'after an advance: tasks due but held back on purpose (a paused type, a worker type not pulled yet)' }),
    ),
  },
  { additionalProperties: false },
);
export type TestClockJson = Static<typeof TestClockJson>;
