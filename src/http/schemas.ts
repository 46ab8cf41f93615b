/**
 * The HTTP contract in one place: these TypeBox schemas validate requests, serialize responses
 * and describe the API.
 */
import { Type, type Static } from 'typebox';
import { MISFIRE_POLICIES, TASK_STATUSES } from '../db/schema.js';
import { MAX_DELAY_MS, MAX_YEARS_AHEAD } from '../time/zones.js';
import { MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN } from '../store/tags.js';
export const MAX_PAGE = 1000;
export const DEFAULT_PAGE = 100;

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

export const TaskJson = Type.Object(
  {
    id: Type.Integer({ description: "punctual's id for the task" }),
    key: Nullable(Type.String({ description: "the caller's dedup key" })),
    type: Type.String(),
    payload: Type.Unknown(),
    status: Type.Enum([...TASK_STATUSES]),
    runAt: Type.String({ description: 'ISO-8601 UTC with milliseconds', examples: ['2026-12-01T02:00:00.000Z'] }),
    runAtLocal: Type.String({ description: "the same instant with the task zone's offset", examples: ['2026-12-01T10:00:00.000+08:00'] }),
    timezone: Type.String({ description: 'IANA zone the task was read in' }),
    attempts: Type.Integer(),
    maxAttempts: Type.Integer(),
    misfire: Type.Enum([...MISFIRE_POLICIES]),
    lastError: Nullable(Type.String()),
    createdAt: Type.String(),
    updatedAt: Type.String(),
    finishedAt: Nullable(Type.String()),
    cron: Nullable(Type.String({ description: 'a recurring task: its cron expression, read in timezone' })),
    seriesId: Nullable(Type.Integer({ description: 'a later occurrence of a recurring task: the id of the first' })),
    tags: Type.Array(Type.String(), { description: 'the tags given at create' }),
    latenessMs: Nullable(Type.Integer({ description: 'how late the latest run started: its start − runAt, in ms' })),
    lastHttpStatus: Nullable(Type.Integer({ description: "an outside (webhook) run: the latest run's HTTP status (0: no answer)" })),
    lastDurationMs: Nullable(Type.Integer({ description: "an outside run: the latest run's duration in ms" })),
    lastResponseBytes: Nullable(Type.Integer({ description: "an outside run: the latest response's body size in bytes" })),
  },
  {
    additionalProperties: false,
    examples: [
      {
        id: 42,
        key: 'close_order:SN123',
        type: 'close_order',
        payload: { orderSn: 'SN123' },
        status: 'pending',
        runAt: '2026-12-01T02:00:00.000Z',
        runAtLocal: '2026-12-01T10:00:00.000+08:00',
        timezone: 'Asia/Shanghai',
        attempts: 0,
        maxAttempts: 4,
        misfire: 'run',
        lastError: null,
        createdAt: '2026-12-01T01:30:00.000Z',
        updatedAt: '2026-12-01T01:30:00.000Z',
        finishedAt: null,
        cron: null,
        seriesId: null,
        tags: ['merchant:42'],
        latenessMs: null,
        lastHttpStatus: null,
        lastDurationMs: null,
        lastResponseBytes: null,
      },
    ],
  },
);
export type TaskJson = Static<typeof TaskJson>;

const RunAt = Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Integer()], {
  description:
    'ISO-8601 with offset (2026-12-01T10:00:00+08:00), naive local (2026-12-01 10:00:00, read in timezone), or epoch milliseconds',
});
const DelayMs = Type.Integer({ minimum: 0, maximum: MAX_DELAY_MS, description: 'run this many ms from now (instead of runAt)' });
const Timezone = Type.String({ minLength: 1, maxLength: 64, description: "IANA zone for a naive runAt; default the service's TIMEZONE" });

export const CreateTaskBody = Type.Object(
  {
    type: Type.String({ minLength: 1, maxLength: 64, description: 'a registered handler: close_order, webhook' }),
    payload: Type.Optional(Type.Object({}, { additionalProperties: true, description: "the handler's input" })),
    runAt: Type.Optional(RunAt),
    delayMs: Type.Optional(DelayMs),
    timezone: Type.Optional(Timezone),
    key: Type.Optional(
      Type.String({ minLength: 1, maxLength: 191, description: 'dedup key: a repeated create never makes a second task' }),
    ),
    maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    misfire: Type.Optional(
      Type.Union([Type.Literal('run'), Type.Literal('skip')], { description: 'what to do if the time passed while punctual was down' }),
    ),
    cron: Type.Optional(
      Type.String({
        minLength: 9,
        maxLength: 120,
        description:
          'makes the task recurring: five cron fields (minute hour day month weekday) read in timezone; when an occurrence finishes, the next is scheduled. Without runAt/delayMs the first is the next match.',
      }),
    ),
    tags: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN }), {
        maxItems: MAX_TAGS,
        description: `at most ${MAX_TAGS} labels of 1 to ${MAX_TAG_LENGTH} characters of A-Z a-z 0-9 _ . : - (e.g. merchant:42), no repeats; bulk changes and the pending list select by them`,
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [
      { type: 'close_order', payload: { orderSn: 'SN123' }, delayMs: 1_800_000, key: 'close_order:SN123', tags: ['merchant:42'] },
      {
        type: 'webhook',
        payload: { url: 'https://shop.example.com/flash-sale/start', body: { sale: 88 } },
        runAt: '2026-12-01 10:00:00',
        timezone: 'Asia/Shanghai',
        key: 'flash-sale:88',
        misfire: 'skip',
      },
      {
        type: 'webhook',
        payload: { url: 'https://shop.example.com/members/reset' },
        cron: '0 0 * * *',
        timezone: 'Asia/Shanghai',
        key: 'members:nightly-reset',
      },
    ],
  },
);
export type CreateTaskBody = Static<typeof CreateTaskBody>;

export const RescheduleBody = Type.Object(
  { runAt: Type.Optional(RunAt), delayMs: Type.Optional(DelayMs), timezone: Type.Optional(Timezone) },
  { additionalProperties: false, examples: [{ delayMs: 600_000 }, { runAt: '2026-12-24 20:00:00', timezone: 'Europe/Berlin' }] },
);
export type RescheduleBody = Static<typeof RescheduleBody>;

export const PendingQuery = Type.Object(
  {
    type: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    tag: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'only tasks with this tag' }),
    ),
    keyPrefix: Type.Optional(Type.String({ minLength: 1, maxLength: 191, description: 'only tasks whose key starts with this' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export const PendingPage = Type.Object(
  {
    tasks: Type.Array(TaskJson),
    nextCursor: Nullable(Type.String({ description: 'pass as cursor for the next page; null on the last page' })),
  },
  { examples: [{ tasks: [], nextCursor: null }] },
);

export const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });
export const KeyParams = Type.Object({ key: Type.String({ minLength: 1, maxLength: 191 }) });

/** Fastify's error shape, kept for every 4xx. */
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

/** A 409 also carries the task as it is now. */
export const ConflictJson = Type.Object({
  statusCode: Type.Integer(),
  code: Type.String(),
  error: Type.String(),
  message: Type.String(),
  task: TaskJson,
});

export const RecentQuery = Type.Object(
  {
    status: Type.Optional(
      Type.Union([Type.Literal('done'), Type.Literal('failed'), Type.Literal('skipped'), Type.Literal('cancelled')], {
        default: 'done',
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  },
  { additionalProperties: false },
);

export const RecentPage = Type.Object({ tasks: Type.Array(TaskJson) });

export const Summary = Type.Object(
  {
    pending: Type.Integer({ description: 'tasks waiting, in the whole table' }),
    running: Type.Integer({ description: 'outside calls in progress' }),
    failed: Type.Integer({ description: 'tasks that failed for good' }),
    armed: Type.Integer({ description: 'timers armed in this process (tasks due within the horizon)' }),
    latenessP50Ms: Nullable(Type.Number()),
    latenessP99Ms: Nullable(Type.Number({ description: 'over the latest 1,000 runs: their stored lateness, start − runAt' })),
    countedAt: Type.String({ description: 'when the counts were taken (they are kept a few seconds)' }),
  },
  {
    examples: [
      { pending: 1204, running: 0, failed: 3, armed: 310, latenessP50Ms: 1, latenessP99Ms: 4, countedAt: '2026-12-01T02:00:00.000Z' },
    ],
  },
);
export type Summary = Static<typeof Summary>;

// ── batch create ──────────────────────────────────────────────────────────────────────────────

export const MAX_BATCH = 1000;

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

// ── bulk changes ──────────────────────────────────────────────────────────────────────────────

/** The fields of a bulk change that pick its tasks (the store's Selector), exactly one given. */
const SelectorFields = {
  tag: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'the pending tasks with this tag' }),
  ),
  keyPrefix: Type.Optional(Type.String({ minLength: 1, maxLength: 191, description: 'the pending tasks whose key starts with this' })),
  type: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'the pending tasks of this type' })),
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

// ── task types: pause and limits ──────────────────────────────────────────────────────────

export const TypeParams = Type.Object({ type: Type.String({ minLength: 1, maxLength: 64, description: 'a task type, e.g. close_order' }) });

export const MAX_CONCURRENCY = 10_000;
export const MAX_RATE = 1_000_000;

export const TypeJson = Type.Object(
  {
    type: Type.String(),
    paused: Type.Boolean({ description: 'its due tasks wait (pending, no attempt used) until it is resumed' }),
    maxConcurrency: Nullable(Type.Integer({ description: 'at most this many runs at once (per group), in each process' })),
    ratePerSecond: Nullable(Type.Number({ description: 'at most this many starts in any one second (per group), in each process' })),
    groupBy: Nullable(Type.String({ description: 'a payload field: the limits apply per value of it' })),
    running: Type.Integer({ description: 'runs of the type in the process that answered, now' }),
    waiting: Type.Integer({ description: 'due tasks the pause or the limits hold back in the process that answered' }),
    due: Type.Integer({ description: 'pending tasks of the type already due, in the whole table (all processes)' }),
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
