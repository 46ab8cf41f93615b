/**
 * The task: how it is shown, how it is created, moved and listed, and the summary of the backlog.
 * A field's description here is the one the OpenAPI document and the clients' types carry.
 */
import { Type, type Static, type TInteger } from 'typebox';
import {
  DEFAULT_PAGE,
  MAX_DELAY_MS,
  MAX_KEY_LENGTH,
  MAX_LIST_OFFSET,
  MAX_LIST_PAGE,
  MAX_PAGE,
  MAX_PRIORITY,
  MAX_SPREAD_MS,
  MAX_TAG_LENGTH,
  MAX_TAGS,
  MAX_TYPE_LENGTH,
  MAX_ZONE_LENGTH,
  MIN_PRIORITY,
  MISFIRE_POLICIES,
  PAST_TOLERANCE_MS,
  TAG_PATTERN,
  TASK_STATUSES,
  type TaskStatus,
} from './limits.js';
import { Nullable } from './nullable.js';

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
    latenessMs: Nullable(
      Type.Integer({
        description:
          "how late the latest run started, of what punctual controls: its start − runAt − the time it waited for its type's pause or limits, in ms",
      }),
    ),
    lastHttpStatus: Nullable(Type.Integer({ description: "an outside (webhook) run: the latest run's HTTP status (0: no answer)" })),
    lastDurationMs: Nullable(Type.Integer({ description: "an outside run: the latest run's duration in ms" })),
    lastResponseBytes: Nullable(Type.Integer({ description: "an outside run: the latest response's body size in bytes" })),
    lastResult: Nullable(
      Type.String({
        description:
          "what the latest successful run's handler answered (e.g. `closed`, `no such order`), at most 200 characters; null when it said nothing",
      }),
    ),
    priority: Type.Integer({
      description: `${MIN_PRIORITY} to ${MAX_PRIORITY}: among tasks due now or overdue, a higher one is claimed first`,
    }),
    expireAfterMs: Nullable(
      Type.Integer({ description: 'no attempt starts later than this after runAt: the task is skipped as expired instead' }),
    ),
    group: Nullable(Type.String({ description: 'its group: the limits of a type with groupBy "group" apply per value of it' })),
    leaseHolder: Type.Optional(
      Type.String({
        description:
          'running under a lease: who holds it, the process running it or, for a pull worker, pull: and a digest of its lease token',
      }),
    ),
    leaseUntil: Type.Optional(
      Type.String({ description: 'running under a lease: when it runs out; past it, the run is stuck and the lease may be released' }),
    ),
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
        lastResult: null,
        priority: 0,
        expireAfterMs: null,
        group: null,
      },
    ],
  },
);
export type TaskJson = Static<typeof TaskJson>;

export const RunAt = Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Integer()], {
  description:
    'ISO-8601 with offset (2026-12-01T10:00:00+08:00), naive local (2026-12-01 10:00:00, read in timezone), or epoch milliseconds',
});
export const DelayMs = Type.Integer({ minimum: 0, maximum: MAX_DELAY_MS, description: 'run this many ms from now (instead of runAt)' });
/** A move to an instant further back than PAST_TOLERANCE_MS is refused unless the request sets this. */
export const AllowPast = Type.Boolean({
  description: `a move to an instant more than ${PAST_TOLERANCE_MS} ms in the past is refused (400 PUNCTUAL_RUN_AT_PAST) unless this is true; the task then runs at once and its lateness counts from the move. delayMs: 0 runs now without it`,
});
export const Timezone = Type.String({
  minLength: 1,
  maxLength: MAX_ZONE_LENGTH,
  description: "IANA zone for a naive runAt; default the service's TIMEZONE",
});

export const Priority = Type.Integer({
  minimum: MIN_PRIORITY,
  maximum: MAX_PRIORITY,
  description: `${MIN_PRIORITY} to ${MAX_PRIORITY}, default 0: among tasks due now or overdue, a higher one is claimed first (a payment-timeout close before a wall of marketing webhooks due at the same second)`,
});

export const CreateTaskBody = Type.Object(
  {
    type: Type.String({
      minLength: 1,
      maxLength: MAX_TYPE_LENGTH,
      description: 'a task type of this service (its handlers, worker types and targets: GET /types)',
    }),
    payload: Type.Optional(Type.Object({}, { additionalProperties: true, description: "the handler's input" })),
    runAt: Type.Optional(RunAt),
    delayMs: Type.Optional(DelayMs),
    timezone: Type.Optional(Timezone),
    key: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'dedup key: a repeated create never makes a second task' }),
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
    priority: Type.Optional(Priority),
    onKeyConflict: Type.Optional(
      Type.Union([Type.Literal('reject'), Type.Literal('replace')], {
        description:
          'with key: what a create does when the key names a task with other content. reject (default): 409. replace: a pending task takes the new payload, runAt, timezone and priority (200 with the task as it now is); a running or finished one is still 409',
      }),
    ),
    expireAfterMs: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_DELAY_MS,
        description:
          'expiry: a task that has not started within this many ms after its runAt never runs; it ends skipped, lastError "expired: …"',
      }),
    ),
    group: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_TAG_LENGTH,
        pattern: TAG_PATTERN,
        description:
          'the task\'s group, on any type (e.g. merchant:42): a type whose limits say groupBy "group" limits each group on its own',
      }),
    ),
    spreadMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_SPREAD_MS,
        description:
          'runs the task at runAt + hash(key) mod spreadMs (the same key always lands on the same instant), or a random offset chosen once without a key: a wall due at one second spread over the next spreadMs',
      }),
    ),
    maxDelayMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_DELAY_MS,
        description:
          'with onKeyConflict replace: debounce with a ceiling, replaces never move the task more than this past its first runAt',
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

export const PayloadBody = Type.Object(
  { payload: Type.Unknown({ description: "the task's new payload, checked against its type's schema as a create's is" }) },
  { additionalProperties: false, examples: [{ payload: { orderSn: 'SN123' } }] },
);
export type PayloadBody = Static<typeof PayloadBody>;

export const RescheduleBody = Type.Object(
  { runAt: Type.Optional(RunAt), delayMs: Type.Optional(DelayMs), timezone: Type.Optional(Timezone), allowPast: Type.Optional(AllowPast) },
  {
    additionalProperties: false,
    examples: [{ delayMs: 600_000 }, { runAt: '2026-12-24 20:00:00', timezone: 'Europe/Berlin' }, { delayMs: 0 }],
  },
);
export type RescheduleBody = Static<typeof RescheduleBody>;

export const PendingQuery = Type.Object(
  {
    type: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH })),
    tag: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'only tasks with this tag' }),
    ),
    keyPrefix: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'only tasks whose key starts with this' }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);
export type PendingQuery = Static<typeof PendingQuery>;

export const PendingPage = Type.Object(
  {
    tasks: Type.Array(TaskJson),
    nextCursor: Nullable(Type.String({ description: 'pass as cursor for the next page; null on the last page' })),
  },
  { examples: [{ tasks: [], nextCursor: null }] },
);
export type PendingPage = Static<typeof PendingPage>;

export const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });
export const KeyParams = Type.Object({ key: Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH }) });

/** A 409 also carries the task as it is now. */
export const ConflictJson = Type.Object({
  statusCode: Type.Integer(),
  code: Type.String(),
  error: Type.String(),
  message: Type.String(),
  task: TaskJson,
});
export type ConflictJson = Static<typeof ConflictJson>;

export const SearchQuery = Type.Object(
  {
    q: Type.String({
      minLength: 1,
      maxLength: MAX_KEY_LENGTH,
      description: "a task id, a key, a key's start, a key's last part after a colon (SN104500 finds close_order:SN104500) or a tag",
    }),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  },
  { additionalProperties: false },
);
export type SearchQuery = Static<typeof SearchQuery>;

export const SearchPage = Type.Object(
  {
    tasks: Type.Array(TaskJson, { description: 'the tasks found, any status, newest first, at most limit' }),
    tagged: Type.Integer({ description: 'how many tasks have q as a tag (all of them, not only those in tasks)' }),
  },
  { examples: [{ tasks: [], tagged: 1610 }] },
);
export type SearchPage = Static<typeof SearchPage>;

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
export type RecentQuery = Static<typeof RecentQuery>;

export const RecentPage = Type.Object({ tasks: Type.Array(TaskJson) });
export type RecentPage = Static<typeof RecentPage>;

export const Summary = Type.Object(
  {
    pending: Type.Integer({ description: 'tasks waiting, in the whole table' }),
    running: Type.Integer({ description: 'outside calls in progress' }),
    failed: Type.Integer({ description: 'tasks that failed for good' }),
    armed: Type.Integer({ description: 'timers armed in this process (tasks due within the horizon)' }),
    latenessP50Ms: Nullable(Type.Number()),
    latenessP99Ms: Nullable(
      Type.Number({
        description:
          "over the latest 1,000 done runs: their start's lateness of what punctual controls, start − runAt − the time they waited for their type's pause or limits",
      }),
    ),
    waitedRuns: Type.Integer({ description: "how many of those runs waited for their type's pause or limits before they started" }),
    waitedP50Ms: Nullable(Type.Number()),
    waitedP99Ms: Nullable(Type.Number({ description: 'how long those runs waited (null: none did); not part of their lateness' })),
    countedAt: Type.String({ description: 'when the counts were taken (they are kept a few seconds)' }),
  },
  {
    examples: [
      {
        pending: 1204,
        running: 0,
        failed: 3,
        armed: 310,
        latenessP50Ms: 1,
        latenessP99Ms: 4,
        waitedRuns: 12,
        waitedP50Ms: 2500,
        waitedP99Ms: 27000,
        countedAt: '2026-12-01T02:00:00.000Z',
      },
    ],
  },
);
export type Summary = Static<typeof Summary>;

/** The filters of GET /tasks and GET /tasks/counts. */
const ListFilterFields = {
  type: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH, description: 'only tasks of this type' })),
  tag: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, description: 'only tasks with this tag' }),
  ),
  keyPrefix: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'only tasks whose key starts with this' })),
  group: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, description: 'only tasks of this group' })),
  series: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'only the tasks of the recurring series whose first task has this id',
    }),
  ),
  dueFrom: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: 'only tasks due (runAt) at or after this instant (ISO-8601 with offset)' }),
  ),
  dueUntil: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: 'only tasks due (runAt) before this instant (ISO-8601 with offset)' }),
  ),
};

export const ListQuery = Type.Object(
  {
    status: Type.Optional(Type.Enum([...TASK_STATUSES], { default: 'pending', description: 'the view: tasks in this status' })),
    ...ListFilterFields,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_LIST_PAGE, default: 50 })),
    offset: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_LIST_OFFSET,
        default: 0,
        description: `tasks to skip: a page number times limit, up to ${MAX_LIST_OFFSET}; deeper, page by after and before`,
      }),
    ),
    after: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'the page after this task: nextCursor of the page before (keyset, any depth)',
      }),
    ),
    before: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'the page before this task: prevCursor of the page after' }),
    ),
    last: Type.Optional(Type.Boolean({ description: 'the last page' })),
    at: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description:
          'jump: the page that starts at the first task due at or after this instant (pending, running), or finished at or before it (ISO-8601 with offset)',
      }),
    ),
  },
  { additionalProperties: false, description: 'at most one of offset, after, before, last, at' },
);
export type ListQuery = Static<typeof ListQuery>;

export const ListPage = Type.Object(
  {
    tasks: Type.Array(TaskJson),
    total: Type.Integer({
      description: 'tasks in this status with these filters, in the whole table (counted a second or two ago at most)',
    }),
    offset: Type.Integer({ description: 'how many tasks of the list come before this page' }),
    nextOffset: Nullable(Type.Integer({ description: 'offset of the next page; null on the last one (or past the deepest offset)' })),
    nextCursor: Nullable(Type.String({ description: 'pass as after for the next page; null on the last one' })),
    prevCursor: Nullable(Type.String({ description: 'pass as before for the page before; null on the first one' })),
  },
  { examples: [{ tasks: [], total: 120, offset: 100, nextOffset: null, nextCursor: null, prevCursor: 'by4xNzk2NTQ0Nzg5MzMzLjEy' }] },
);
export type ListPage = Static<typeof ListPage>;

export const CountsQuery = Type.Object(ListFilterFields, { additionalProperties: false });
export type CountsQuery = Static<typeof CountsQuery>;

export const StatusCounts = Type.Object(
  {
    counts: Type.Object(Object.fromEntries(TASK_STATUSES.map((status) => [status, Type.Integer()])) as Record<TaskStatus, TInteger>),
    countedAt: Type.String({ description: 'when the counts were taken (one reading is shared for a second or two)' }),
  },
  {
    examples: [
      {
        counts: { pending: 2296, running: 3, done: 18_204, failed: 7, cancelled: 120, skipped: 4 },
        countedAt: '2026-12-01T02:00:00.000Z',
      },
    ],
  },
);
export type StatusCounts = Static<typeof StatusCounts>;
