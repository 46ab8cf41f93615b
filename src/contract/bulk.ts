/**
 * Bulk changes (admin role): cancel or move every pending task with a tag, a key prefix or a
 * type. A shifted move carries a request id, so a repeat moves nothing twice.
 */
import { Type, type Static } from 'typebox';
import { MAX_DELAY_MS, MAX_KEY_LENGTH, MAX_TAG_LENGTH, MAX_TYPE_LENGTH, TAG_PATTERN } from './limits.js';
import { RunAt, Timezone } from './tasks.js';

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

export const BulkCancelBody = Type.Object(SelectorFields, {
  additionalProperties: false,
  description: 'exactly one of tag, keyPrefix, type',
  examples: [{ tag: 'merchant:42' }],
});
export type BulkCancelBody = Static<typeof BulkCancelBody>;

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
    matched: Type.Integer({ description: 'pending tasks the selector found' }),
    changed: Type.Integer({ description: 'tasks this request changed (a task that ran meanwhile, or was changed already, is not)' }),
  },
  { examples: [{ matched: 1200, changed: 1200 }] },
);
export type BulkResult = Static<typeof BulkResult>;
