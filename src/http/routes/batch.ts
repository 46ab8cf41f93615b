/**
 * POST /tasks/batch: up to MAX_BATCH creates in one request, each answered with the status
 * POST /tasks would give it (201, 200, 409, 400 with its message), in order. Each item is read
 * by the same function as a single create (create-input.ts) and created by the same lifecycle
 * transition; the intake's group commit writes the valid ones with multi-row INSERTs. A bad item
 * is answered and left out; it changes nothing and refuses nothing else. An answer carries the
 * task's id, not the whole task: presenting 1,000 tasks would cost more than writing them.
 * Reading the items yields to the event loop every few milliseconds, so a batch of costly
 * items (whatever makes them costly) never holds the armed timers back for long.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../time/clock.js';
import type { CreateRequest } from '../../lifecycle/create.js';
import type { Lifecycle } from '../../lifecycle/lifecycle.js';
import { conflictMessage, createFromBatchItem, MAX_PAYLOAD_BYTES, type CreateInput } from '../create-input.js';
import { HttpError } from '../errors.js';
import { endOnError, keepTrace, startCreateTrace } from '../create-trace.js';
import type { CreateSpan, Tracing } from '../../observability/tracing.js';
import { BatchBody, BatchResult } from '../../contract/batch.js';
import { ErrorJson } from '../../contract/errors.js';
import { MAX_BATCH } from '../../contract/limits.js';

/** A full batch of large payloads, with room for the JSON around them. */
export const BATCH_BODY_LIMIT_BYTES = 16 * 1024 * 1024;

export interface BatchRoutesOptions extends CreateInput {
  lifecycle: Lifecycle;
  clock: Clock;
  /** Traces: the batch's span, and the context its tasks keep. */
  tracing?: Tracing;
}

/** The most the item loop runs before it lets timers and other requests in. */
const YIELD_AFTER_MS = 10;

type ItemAnswer = { status: number; id?: number; key?: string | null; code?: string; message?: string };
type BatchAnswer = { results: ItemAnswer[]; created: number; repeated: number; refused: number };

export const batchRoutes: FastifyPluginAsync<BatchRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { lifecycle, clock } = options;

  app.post(
    '/tasks/batch',
    {
      bodyLimit: BATCH_BODY_LIMIT_BYTES,
      schema: {
        summary: `Schedule up to ${MAX_BATCH} tasks at once`,
        tags: ['tasks'],
        description: `Each item is a POST /tasks body and gets the answer POST /tasks would give it, in order: 201 created, 200 its key named the same task, 409 its key named another, 400 with the message naming the field. A bad item changes nothing. Payloads up to ${MAX_PAYLOAD_BYTES} bytes each, the whole body up to ${BATCH_BODY_LIMIT_BYTES} bytes.`,
        body: BatchBody,
        response: { 200: BatchResult, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson },
      },
    },
    async (request) => {
      const now = clock.now();
      const span = startCreateTrace(options.tracing, '/tasks/batch', request);
      try {
        const answer = await createBatch(request, now, span);
        span?.end(200, answer.ids);
        return answer.body;
      } catch (error) {
        endOnError(span, error);
        throw error;
      }
    },
  );

  /** The batch's items checked and created; answers each item's answer, and the ids created. */
  async function createBatch(
    request: { body: { tasks: unknown[] }; replaced?: number[] },
    now: number,
    span: CreateSpan | undefined,
  ): Promise<{ body: BatchAnswer; ids: number[] }> {
    const items = request.body.tasks;
    const answers: ItemAnswer[] = new Array<ItemAnswer>(items.length);
    // The valid items' creates and where they stand in the batch, side by side: no object an item.
    const creates: CreateRequest[] = [];
    const at: number[] = [];
    let refused = 0;
    let since = performance.now();
    for (let index = 0; index < items.length; index++) {
      if (performance.now() - since >= YIELD_AFTER_MS) {
        await nextTurn();
        since = performance.now();
      }
      try {
        creates.push(keepTrace(span, createFromBatchItem(items[index], options, now)));
        at.push(index);
      } catch (error) {
        if (!(error instanceof HttpError)) throw error;
        answers[index] = { status: error.statusCode, code: error.code, message: error.message };
        refused++;
      }
    }
    const results = await lifecycle.createMany(creates, now);
    const counts = { created: 0, repeated: 0, refused };
    const created: number[] = [];
    for (let i = 0; i < results.length; i++) {
      const result = results[i]!;
      const { id, key } = result.task;
      if (result.outcome === 'replaced') (request.replaced ??= []).push(id);
      if (result.outcome === 'conflict') {
        answers[at[i]!] = { status: 409, id, key, code: 'PUNCTUAL_CONFLICT', message: conflictMessage(result.task) };
        counts.refused++;
      } else if (result.outcome === 'created') {
        answers[at[i]!] = { status: 201, id, key };
        counts.created++;
        created.push(id);
      } else {
        answers[at[i]!] = { status: 200, id, key };
        counts.repeated++;
      }
    }
    return { body: { results: answers, ...counts }, ids: created };
  }
};
