/**
 * A task's run history: GET /tasks/:id/runs, newest first, paged by run id. The rows are written
 * with each run's outcome (src/store/run-history.ts); a task that ran before the history was on,
 * or with RUN_HISTORY=off, has none.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { RunHistory, TaskRun } from '../../store/run-history.js';
import type { TaskStore } from '../../store/task-store.js';
import { toIsoUtc } from '../../time/zones.js';
import { notFound } from '../errors.js';
import { ErrorJson } from '../../contract/errors.js';
import { IdParams } from '../../contract/tasks.js';
import { RunsPage, RunsQuery, type RunJson } from '../../contract/runs.js';

export interface RunRoutesOptions {
  store: TaskStore;
  history: RunHistory;
}

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
    httpStatus: run.httpStatus,
    process: run.process,
  };
}

export const runRoutes: FastifyPluginAsync<RunRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
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
      if ((await options.store.get(id)) === undefined) throw notFound(`task ${id}`);
      const runs = await options.history.ofTask(id, limit + 1, cursor === undefined ? undefined : Number(cursor));
      const page = runs.slice(0, limit);
      return {
        runs: page.map(presentRun),
        nextCursor: runs.length > limit ? String(page[page.length - 1]!.id) : null,
      };
    },
  );
};
