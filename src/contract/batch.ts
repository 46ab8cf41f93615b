/**
 * POST /tasks/batch: up to MAX_BATCH creates in one request. Each item is a POST /tasks body,
 * checked on its own, so the body's schema takes any item and the answer is one result per item.
 */
import { Type, type Static } from 'typebox';
import { MAX_BATCH } from './limits.js';
import { Nullable } from './nullable.js';

export const BatchBody = Type.Object(
  {
    tasks: Type.Array(Type.Unknown(), {
      minItems: 1,
      maxItems: MAX_BATCH,
      description: `1 to ${MAX_BATCH} bodies of POST /tasks; each is checked on its own, so a bad one refuses only itself`,
    }),
  },
  {
    additionalProperties: false,
    examples: [
      {
        tasks: [
          { type: 'close_order', payload: { orderSn: 'SN1' }, delayMs: 1_800_000, key: 'close_order:SN1', tags: ['merchant:42'] },
          { type: 'close_order', payload: { orderSn: 'SN2' }, delayMs: 1_800_000, key: 'close_order:SN2', tags: ['merchant:42'] },
        ],
      },
    ],
  },
);

/**
 * One item's answer: the status POST /tasks would give it, with the task's id (and key), or the
 * error. Only the id: a batch is about throughput, GET /tasks/:id shows the whole task.
 */
export const BatchItem = Type.Object({
  status: Type.Integer({ description: '201 created, 200 same key and content, 409 same key other content, 400 bad item' }),
  id: Type.Optional(Type.Integer({ description: 'the task created, or for 200 and 409 the task the key names' })),
  key: Type.Optional(Nullable(Type.String())),
  code: Type.Optional(Type.String()),
  message: Type.Optional(Type.String({ description: 'for a 400 or 409: what POST /tasks would say' })),
});

export const BatchResult = Type.Object({
  results: Type.Array(BatchItem, { description: 'one per item, in the order given' }),
  created: Type.Integer(),
  repeated: Type.Integer({ description: 'items answered 200 (their key named the same task)' }),
  refused: Type.Integer({ description: 'items answered 400 or 409' }),
});
export type BatchResult = Static<typeof BatchResult>;
