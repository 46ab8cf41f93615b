/**
 * Bulk changes (admin role): cancel or move every pending task with a tag, a key prefix, a type
 * or an id among a list, or retry every failed one. A shifted move carries a request id, so a
 * repeat moves nothing twice.
 */
import { Type, type Static } from 'typebox';
import { MAX_BULK_IDS, MAX_DELAY_MS, MAX_KEY_LENGTH, MAX_TAG_LENGTH, MAX_TYPE_LENGTH, TAG_PATTERN } from './limits.js';
import { AllowPast, RunAt, Timezone } from './tasks.js';

/** The fields of a bulk change that pick its tasks (the store's Selector), exactly one given. */
const SelectorFields = {
  tag: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'the pending tasks with this tag' }),
  ),
  keyPrefix: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'the pending tasks whose key starts with this' }),
  ),
  type: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH, description: 'the pending tasks of this type' })),
};

/** A selection (a console's ticked rows), as a selector of its own. */
const Ids = Type.Array(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), {
  minItems: 1,
  maxItems: MAX_BULK_IDS,
  uniqueItems: true,
  description: `up to ${MAX_BULK_IDS} task ids: those among them in the state the change needs`,
});

export const BulkCancelBody = Type.Object(
  { ...SelectorFields, ids: Type.Optional(Ids) },
  {
    additionalProperties: false,
    description: 'exactly one of tag, keyPrefix, type, ids',
    examples: [{ tag: 'merchant:42' }, { ids: [1204, 1205, 1209] }],
  },
);
export type BulkCancelBody = Static<typeof BulkCancelBody>;

export const BulkRetryBody = Type.Object(
  {
    tag: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'the failed tasks with this tag' }),
    ),
    keyPrefix: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'the failed tasks whose key starts with this' }),
    ),
    type: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH, description: 'the failed tasks of this type' })),
    ids: Type.Optional(Ids),
    all: Type.Optional(Type.Literal(true, { description: 'every failed task' })),
  },
  {
    additionalProperties: false,
    description: 'exactly one of tag, keyPrefix, type, ids, all: each failed task among them runs again now, its attempts reset',
    examples: [{ tag: 'merchant:42' }, { ids: [1204, 1205] }, { all: true }],
  },
);
export type BulkRetryBody = Static<typeof BulkRetryBody>;

export const BulkDeleteBody = Type.Object(
  {
    status: Type.Enum(['failed', 'done', 'cancelled', 'skipped'], { description: 'the finished tasks to delete: those in this status' }),
    tag: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'the tasks with this tag' }),
    ),
    keyPrefix: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'the tasks whose key starts with this' })),
    type: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH, description: 'the tasks of this type' })),
    ids: Type.Optional(Ids),
    all: Type.Optional(Type.Literal(true, { description: 'every task in the status' })),
  },
  {
    additionalProperties: false,
    description:
      'a status and exactly one of tag, keyPrefix, type, ids, all: each task among them still in that status is deleted, with its runs',
    examples: [
      { status: 'failed', all: true },
      { status: 'failed', type: 'close_order' },
      { status: 'done', ids: [1204, 1205] },
    ],
  },
);
export type BulkDeleteBody = Static<typeof BulkDeleteBody>;

export const BulkRescheduleBody = Type.Object(
  {
    ...SelectorFields,
    runAt: Type.Optional(RunAt),
    timezone: Type.Optional(Timezone),
    shiftMs: Type.Optional(
      Type.Integer({ minimum: -MAX_DELAY_MS, maximum: MAX_DELAY_MS, description: 'move each task by this many ms (negative: earlier)' }),
    ),
    requestId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        pattern: TAG_PATTERN,
        description: 'required with shiftMs: a task already moved by this request id is not moved again, so a repeat is harmless',
      }),
    ),
    allowPast: Type.Optional(AllowPast),
  },
  {
    additionalProperties: false,
    description: 'exactly one of tag, keyPrefix, type; exactly one of runAt (set) and shiftMs (shift)',
    examples: [
      { tag: 'merchant:42', shiftMs: 3_600_000, requestId: 'postpone-merchant-42-2026-12-01' },
      { keyPrefix: 'flash-sale:88:', runAt: '2026-12-01 12:00:00', timezone: 'Asia/Shanghai' },
    ],
  },
);
export type BulkRescheduleBody = Static<typeof BulkRescheduleBody>;

export const BulkResult = Type.Object(
  {
    matched: Type.Integer({ description: 'tasks in the state the change needs (pending; failed for a retry) the selector found' }),
    changed: Type.Integer({ description: 'tasks this request changed (a task that ran meanwhile, or was changed already, is not)' }),
  },
  { examples: [{ matched: 1200, changed: 1200 }] },
);
export type BulkResult = Static<typeof BulkResult>;
