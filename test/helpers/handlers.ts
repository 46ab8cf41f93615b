/** Handlers made for tests: any payload object, a run the test writes. */
import { Type } from 'typebox';
import type { DatabaseContext, DatabaseHandler } from '../../src/handlers/handler.js';
import { PermanentError } from '../../src/handlers/handler.js';

const anyObject = Type.Object({}, { additionalProperties: true });

export function testHandler(
  type: string,
  run: (ctx: DatabaseContext<Record<string, unknown>>) => Promise<string | void>,
  timeoutMs = 10_000,
): DatabaseHandler<typeof anyObject> {
  return { type, effect: 'database', payload: anyObject, timeoutMs, run };
}

/** Handlers that produce every run outcome for metrics: `flaky` fails its first try, `hopeless` fails for good. */
export function outcomeHandlers() {
  return [
    testHandler('flaky', async ({ task }) => {
      if (task.attempts === 0) throw new Error('first try fails');
    }),
    testHandler('hopeless', async () => {
      throw new PermanentError('never');
    }),
  ];
}
