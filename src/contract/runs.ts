/**
 * A task's run history: one entry per run (an attempt that started and ended, or whose lease ran
 * out), newest first. A field's description here is the one the OpenAPI document carries.
 */
import { Type, type Static } from 'typebox';
import { Nullable } from './nullable.js';

export const RUN_OUTCOMES = ['done', 'retry', 'failed', 'lost'] as const;

export const RunJson = Type.Object({
  id: Nullable(
    Type.Integer({
      description:
        "the run's row; ids grow with time across every task. Null for a run that succeeded: it is on record in its task's row (always the task's latest run)",
    }),
  ),
  taskId: Type.Integer(),
  attempt: Type.Integer({ description: 'which attempt of the task this run was, from 1' }),
  outcome: Type.Enum([...RUN_OUTCOMES], {
    description: '`done`; `retry`: failed, to be tried again; `failed`: for good; `lost`: its lease ran out (its process stopped mid-run)',
  }),
  dueAt: Type.String({
    format: 'date-time',
    description: 'when it fell due: its runAt, or the create or move that set that runAt when it came later',
  }),
  startedAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.String({ format: 'date-time' }),
  waitedMs: Type.Integer({
    description: "how long it waited for its type's pause or limits before it started (0: it did not); not part of its lateness",
  }),
  waitReason: Nullable(
    Type.Enum(['pause', 'limit'], { description: 'what it waited for the longest: `pause`, or `limit` (maxConcurrency, ratePerSecond)' }),
  ),
  startLatenessMs: Type.Integer({ description: 'how late it started, of what punctual controls: startedAt − dueAt − waitedMs' }),
  finishLatenessMs: Type.Integer({ description: 'how late it finished, of what punctual controls: finishedAt − dueAt − waitedMs' }),
  durationMs: Type.Integer({ description: 'how long the handler ran (a batch: from its start to its record)' }),
  error: Nullable(Type.String()),
  result: Nullable(
    Type.String({ description: "what the handler answered (e.g. `closed`, `no such order`, a webhook's status), at most 200 characters" }),
  ),
  httpStatus: Nullable(Type.Integer({ description: 'an outside run: the HTTP status it got (0: no answer)' })),
  process: Type.String({ description: 'the process that ran it (host:pid:tag), or the pull lease (`pull:` and a digest of its token)' }),
});
export type RunJson = Static<typeof RunJson>;

export const LastHourJson = Type.Object({
  since: Type.String({ format: 'date-time', description: 'the start of the hour counted' }),
  until: Type.String({ format: 'date-time', description: 'when it was counted' }),
  runs: Type.Integer({
    description: 'runs that finished in the hour, in every process (from the run history, so a restart changes nothing)',
  }),
  done: Type.Integer(),
  retries: Type.Integer({ description: 'runs that failed and will be tried again' }),
  failed: Type.Integer({ description: 'runs that failed for good' }),
  lost: Type.Integer({ description: 'runs whose lease ran out (their process stopped mid-run)' }),
  waited: Type.Integer({ description: "runs that waited for their type's pause or limits before they started" }),
  latenessP50Ms: Nullable(Type.Integer({ description: 'start lateness p50 of the runs that started (startedAt − dueAt − waitedMs)' })),
  latenessP99Ms: Nullable(Type.Integer({ description: 'start lateness p99 of the runs that started' })),
});
export type LastHourJson = Static<typeof LastHourJson>;

export const RunsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    cursor: Type.Optional(Type.String({ pattern: '^[0-9]{1,16}$', description: "a previous page's nextCursor" })),
  },
  { additionalProperties: false },
);
export type RunsQuery = Static<typeof RunsQuery>;

export const RunsPage = Type.Object({
  runs: Type.Array(RunJson),
  nextCursor: Nullable(Type.String({ description: 'null on the last page' })),
});
export type RunsPage = Static<typeof RunsPage>;
