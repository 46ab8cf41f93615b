/**
 * The error answers: Fastify's shape for every 4xx, whose message names the field at fault. A 409
 * also carries the task as it is now; that schema is in tasks.ts, beside the task.
 */
import { Type, type Static } from 'typebox';
import { MAX_YEARS_AHEAD } from './limits.js';

export const ErrorJson = Type.Object(
  {
    statusCode: Type.Integer(),
    code: Type.String(),
    error: Type.String(),
    message: Type.String({ description: 'names the field at fault' }),
  },
  {
    examples: [
      {
        statusCode: 400,
        code: 'PUNCTUAL_BAD_REQUEST',
        error: 'Bad Request',
        message: `body/runAt must not be more than ${MAX_YEARS_AHEAD} years ahead`,
      },
    ],
  },
);
export type ErrorJson = Static<typeof ErrorJson>;
