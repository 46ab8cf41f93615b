/**
 * The data behind the dashboard's charts, read-only: what falls due soon (from the table, the
 * whole fleet's tasks) and how the last hour of runs went (from this process's ring). Arrays
 * are per bucket, oldest first, so a chart draws them as they come.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Clock } from '../../time/clock.js';
import type { RecentRuns } from '../../observability/recent-runs.js';
import type { UpcomingLoad } from '../../store/upcoming-load.js';
import { toIsoUtc } from '../../time/zones.js';
import { ErrorJson } from '../schemas.js';

export interface ChartRoutesOptions {
  clock: Clock;
  upcoming: UpcomingLoad;
  recent: RecentRuns;
}

const Counts = Type.Array(Type.Integer());
const CountsByType = Type.Record(Type.String(), Counts, { description: 'type → one count per bucket' });
const Buckets = Type.Object({
  start: Type.String({ description: "the first bucket's start, ISO-8601 UTC" }),
  stepMs: Type.Integer({ description: 'width of a bucket' }),
  byType: CountsByType,
});
const Upcoming = Type.Object({
  countedAt: Type.String({ description: 'when it was counted: a count is kept a few seconds, and served while the next one runs' }),
  countMs: Type.Integer({ description: 'how long the count took' }),
  overdue: Type.Integer({ description: 'pending tasks due before the current minute (counted up to 1,000,000)' }),
  minutes: Buckets,
  hours: Buckets,
});
const Millis = Type.Array(Type.Union([Type.Number(), Type.Null()]), { description: 'null where nothing ran' });
const Recent = Type.Object({
  at: Type.String(),
  start: Type.String({ description: "the first slot's start, ISO-8601 UTC" }),
  slotMs: Type.Integer(),
  done: Counts,
  retries: Type.Array(Type.Integer(), { description: 'runs that failed and will be tried again' }),
  failures: Type.Array(Type.Integer(), { description: 'runs that failed for good' }),
  latenessP50Ms: Millis,
  latenessP99Ms: Millis,
});

export const chartRoutes: FastifyPluginAsync<ChartRoutesOptions> = async (fastify, { clock, upcoming, recent }) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/charts/upcoming',
    {
      schema: {
        summary: 'Pending tasks due per minute over the next hour and per hour over the next 7 days, by type',
        tags: ['operations'],
        response: { 200: Upcoming, 401: ErrorJson },
      },
    },
    async () => {
      const counts = await upcoming.read(clock.now());
      return {
        countedAt: toIsoUtc(counts.at),
        countMs: counts.countMs,
        overdue: counts.overdue,
        minutes: { ...counts.minutes, start: toIsoUtc(counts.minutes.start) },
        hours: { ...counts.hours, start: toIsoUtc(counts.hours.start) },
      };
    },
  );

  app.get(
    '/charts/recent',
    {
      schema: {
        summary: "This process's runs over the last hour, per 10 s: by outcome, and lateness p50 and p99",
        tags: ['operations'],
        response: { 200: Recent, 401: ErrorJson },
      },
    },
    async () => {
      const now = clock.now();
      const { starts, slotMs, ...series } = recent.snapshot(now);
      return { at: toIsoUtc(now), start: toIsoUtc(starts[0]!), slotMs, ...series };
    },
  );
};
