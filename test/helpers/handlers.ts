/** Handlers made for tests: any payload object, a run the test writes. */
import { Type } from 'typebox';
import type { DatabaseContext, DatabaseHandler } from '../../src/handlers/handler.js';

const anyObject = Type.Object({}, { additionalProperties: true });

export function testHandler(
  type: string,
  run: (ctx: DatabaseContext<Record<string, unknown>>) => Promise<string | void>,
  timeoutMs = 10_000,
): DatabaseHandler<typeof anyObject> {
  return { type, effect: 'database', payload: anyObject, timeoutMs, run };
}
