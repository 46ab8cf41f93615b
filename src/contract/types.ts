/**
 * Task types: each one's pause and run limits, and what of it runs and waits. A pause or a limit
 * is the fleet's (stored, re-read by every process); the counts are the answering process's.
 */
import { Type, type Static } from 'typebox';
import { DUE_COUNT_CAP, MAX_CONCURRENCY, MAX_RATE, MAX_TYPE_LENGTH } from './limits.js';
import { Nullable } from './nullable.js';

export const TypeParams = Type.Object({
  type: Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH, description: 'a task type, e.g. close_order' }),
});

export const TypeJson = Type.Object(
  {
    type: Type.String(),
    paused: Type.Boolean({ description: 'its due tasks wait (pending, no attempt used) until it is resumed' }),
    maxConcurrency: Nullable(Type.Integer({ description: 'at most this many runs at once (per group), across every process' })),
    ratePerSecond: Nullable(Type.Number({ description: 'at most this many starts in any one second (per group), across every process' })),
    groupBy: Nullable(
      Type.String({ description: 'a payload field, or "group" for the task\'s own group field: the limits apply per value of it' }),
    ),
    running: Type.Integer({ description: 'runs of the type in the process that answered, now' }),
    waiting: Type.Integer({ description: 'due tasks the pause or the limits hold back in the process that answered' }),
    due: Type.Integer({
      description: `pending tasks of the type already due, in the whole table (all processes), counted up to ${DUE_COUNT_CAP} (${DUE_COUNT_CAP} means that many or more) and read at most 5 s ago`,
    }),
    updatedAt: Nullable(Type.String({ description: 'when the pause or the limits last changed; null: never set' })),
  },
  {
    additionalProperties: false,
    examples: [
      {
        type: 'webhook',
        paused: false,
        maxConcurrency: 4,
        ratePerSecond: 20,
        groupBy: 'merchant',
        running: 3,
        waiting: 12,
        due: 12,
        updatedAt: '2026-12-01T01:30:00.000Z',
      },
    ],
  },
);
export type TypeJson = Static<typeof TypeJson>;

export const TypeList = Type.Object({ types: Type.Array(TypeJson) }, { additionalProperties: false });
export type TypeList = Static<typeof TypeList>;

export const LimitsBody = Type.Object(
  {
    maxConcurrency: Type.Optional(
      Nullable(Type.Integer({ minimum: 1, maximum: MAX_CONCURRENCY, description: 'null clears it; pause the type to stop it' })),
    ),
    ratePerSecond: Type.Optional(
      Nullable(Type.Number({ minimum: 0.001, maximum: MAX_RATE, description: 'starts per second; null clears it' })),
    ),
    groupBy: Type.Optional(
      Nullable(
        Type.String({
          minLength: 1,
          maxLength: 64,
          pattern: '^[A-Za-z0-9_.-]+$',
          description: 'a top-level payload field (e.g. merchant); null: the limits apply to the type as a whole',
        }),
      ),
    ),
  },
  {
    additionalProperties: false,
    description: 'A field left out is kept; null clears it.',
    examples: [{ maxConcurrency: 4, ratePerSecond: 20, groupBy: 'merchant' }],
  },
);
export type LimitsBody = Static<typeof LimitsBody>;
