/**
 * The HTTP contract in one place: these TypeBox schemas validate requests, serialize responses
 * and describe the API.
 */
import { Type, type Static } from 'typebox';
import { MISFIRE_POLICIES, TASK_STATUSES } from '../db/schema.js';
import { MAX_DELAY_MS, MAX_YEARS_AHEAD } from '../time.js';
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
  },
  {
    additionalProperties: false,
    examples: [
      { type: 'close_order', payload: { orderSn: 'SN123' }, delayMs: 1_800_000, key: 'close_order:SN123' },
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
    latenessP99Ms: Nullable(Type.Number({ description: 'over the latest 1,000 runs: finished_at − run_at' })),
    countedAt: Type.String({ description: 'when the counts were taken (they are kept a few seconds)' }),
  },
  {
    examples: [
      { pending: 1204, running: 0, failed: 3, armed: 310, latenessP50Ms: 1, latenessP99Ms: 4, countedAt: '2026-12-01T02:00:00.000Z' },
    ],
  },
);
export type Summary = Static<typeof Summary>;

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
