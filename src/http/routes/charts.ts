/**
 * The data behind the dashboard's charts, read-only: what falls due soon (from the table, the
 * whole fleet's tasks) and how the last hour of runs went (from this process's ring). Arrays
 * are per bucket, oldest first, so a chart draws them as they come.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../time/clock.js';
import type { RecentRuns } from '../../observability/recent-runs.js';
import type { UpcomingLoad } from '../../store/upcoming-load.js';
import { toIsoUtc } from '../../time/zones.js';
import { RecentRunsJson, UpcomingLoadJson } from '../../contract/charts.js';
import { ErrorJson } from '../../contract/errors.js';

export interface ChartRoutesOptions {
  clock: Clock;
  upcoming: UpcomingLoad;
  recent: RecentRuns;
}

export const chartRoutes: FastifyPluginAsync<ChartRoutesOptions> = async (fastify, { clock, upcoming, recent }) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/charts/upcoming',
    {
      schema: {
        summary: 'Pending tasks due per minute over the next hour and per hour over the next 7 days, by type',
        tags: ['operations'],
        response: { 200: UpcomingLoadJson, 401: ErrorJson },
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
        summary:
          "This process's runs over the last hour, per 10 s: by outcome, lateness p50 and p99, and apart from it their waits for a pause or a limit",
        tags: ['operations'],
        response: { 200: RecentRunsJson, 401: ErrorJson },
      },
    },
    async () => {
      const now = clock.now();
      const { starts, slotMs, ...series } = recent.snapshot(now);
      return { at: toIsoUtc(now), start: toIsoUtc(starts[0]!), slotMs, ...series };
    },
  );
};
