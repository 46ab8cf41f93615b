/**
 * A task's run history: GET /tasks/:id/runs, newest first, paged by run id. Each run is on record
 * with its outcome (src/store/run-history.ts: a successful one in its task's row, the others in
 * rows of their own); a task that ran before the history was on, or with RUN_HISTORY=off, has
 * none. GET /runs/last-hour counts the last hour's runs from the same records: every process's, so neither a restart nor which process answers changes the figures. One
 * reading is shared for LAST_HOUR_TTL_MS (a console polls every 2 s; the count reads an hour of rows).
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { RunHistory, TaskRun } from '../../store/run-history.js';
import type { TaskStore } from '../../store/task-store.js';
import type { Clock } from '../../time/clock.js';
import { toIsoUtc } from '../../time/zones.js';
import { notFound } from '../errors.js';
import { ErrorJson } from '../../contract/errors.js';
import { IdParams } from '../../contract/tasks.js';
import { LastHourJson, RunsPage, RunsQuery, type RunJson } from '../../contract/runs.js';

export interface RunRoutesOptions {
  store: TaskStore;
  history: RunHistory;
  clock: Clock;
}

const HOUR_MS = 3_600_000;
const LAST_HOUR_TTL_MS = 5000;

export function presentRun(run: TaskRun): RunJson {
  return {
    id: run.id,
    taskId: run.taskId,
    attempt: run.attempt,
    outcome: run.outcome,
    dueAt: toIsoUtc(run.dueAt),
    startedAt: toIsoUtc(run.startedAt),
    finishedAt: toIsoUtc(run.finishedAt),
    waitedMs: run.waitedMs,
    waitReason: run.waitReason,
    startLatenessMs: run.latenessMs,
    finishLatenessMs: run.finishedAt - run.dueAt - run.waitedMs,
    durationMs: run.durationMs,
    error: run.error,
    result: run.result,
    httpStatus: run.httpStatus,
    process: run.process,
  };
}

export const runRoutes: FastifyPluginAsync<RunRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  let reading: { at: number; answer: Promise<LastHourJson> } | undefined;

  app.get(
    '/runs/last-hour',
    {
      schema: {
        summary: "The last hour's runs of the whole fleet, from the run history: by outcome, with lateness p50 and p99",
        tags: ['operations'],
        response: { 200: LastHourJson, 401: ErrorJson },
      },
    },
    async () => {
      const now = options.clock.now();
      if (reading === undefined || now - reading.at >= LAST_HOUR_TTL_MS) {
        const answer = options.history.finishedSince(now - HOUR_MS).then((figures) => ({
          since: toIsoUtc(now - HOUR_MS),
          until: toIsoUtc(now),
          runs: figures.done + figures.retries + figures.failed + figures.lost,
          ...figures,
        }));
        reading = { at: now, answer };
        // A failed count is not kept: the next request counts again.
        answer.catch(() => {
          if (reading?.answer === answer) reading = undefined;
        });
      }
      return reading.answer;
    },
  );

  app.get(
    '/tasks/:id/runs',
    {
      schema: {
        summary: "A task's runs, newest first",
        tags: ['tasks'],
        params: IdParams,
        querystring: RunsQuery,
        response: { 200: RunsPage, 400: ErrorJson, 401: ErrorJson, 404: ErrorJson },
      },
    },
    async (request) => {
      const { id } = request.params;
      const { limit = 100, cursor } = request.query;
      if ((await options.store.reads.get(id)) === undefined) throw notFound(`task ${id}`);
      const runs = await options.history.ofTask(id, limit + 1, cursor === undefined ? undefined : Number(cursor));
      const page = runs.slice(0, limit);
      return {
        runs: page.map(presentRun),
        // A page that ends with the successful run (it has no row id) goes on with every row.
        nextCursor: runs.length > limit ? String(page[page.length - 1]!.id ?? Number.MAX_SAFE_INTEGER) : null,
      };
    },
  );
};
