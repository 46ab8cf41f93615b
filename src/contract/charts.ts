/**
 * The data behind the dashboard's charts: what falls due soon (the whole fleet's tasks) and how
 * the last hour of runs went (the answering process's). Arrays are per bucket, oldest first.
 */
import { Type, type Static } from 'typebox';

const Counts = Type.Array(Type.Integer());
const CountsByType = Type.Record(Type.String(), Counts, { description: 'type → one count per bucket' });
const Buckets = Type.Object({
  start: Type.String({ description: "the first bucket's start, ISO-8601 UTC" }),
  stepMs: Type.Integer({ description: 'width of a bucket' }),
  byType: CountsByType,
});

export const UpcomingLoadJson = Type.Object({
  countedAt: Type.String({ description: 'when it was counted: a count is kept a few seconds, and served while the next one runs' }),
  countMs: Type.Integer({ description: 'how long the count took' }),
  overdue: Type.Integer({ description: 'pending tasks due before the current minute (counted up to 1,000,000)' }),
  minutes: Buckets,
  hours: Buckets,
});
export type UpcomingLoadJson = Static<typeof UpcomingLoadJson>;

const Millis = Type.Array(Type.Union([Type.Number(), Type.Null()]), { description: 'null where nothing ran' });

export const RecentRunsJson = Type.Object({
  at: Type.String(),
  start: Type.String({ description: "the first slot's start, ISO-8601 UTC" }),
  slotMs: Type.Integer(),
  done: Counts,
  retries: Type.Array(Type.Integer(), { description: 'runs that failed and will be tried again' }),
  failures: Type.Array(Type.Integer(), { description: 'runs that failed for good' }),
  latenessP50Ms: Millis,
  latenessP99Ms: Type.Array(Type.Union([Type.Number(), Type.Null()]), {
    description: "null where nothing ran; the start's lateness of what punctual controls: start − runAt − the run's wait for its type",
  }),
  waited: Type.Array(Type.Integer(), { description: "runs that waited for their type's pause or limits before they started" }),
  waitedP50Ms: Type.Array(Type.Union([Type.Number(), Type.Null()]), { description: 'null where no run waited' }),
  waitedP99Ms: Type.Array(Type.Union([Type.Number(), Type.Null()]), {
    description: "null where no run waited; how long runs waited for their type's pause or limits (not part of their lateness)",
  }),
});
export type RecentRunsJson = Static<typeof RecentRunsJson>;
