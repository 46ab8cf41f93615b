/**
 * The task routes: create, list pending, read, cancel, reschedule and retry (by id or by key).
 * A route parses its request, calls the lifecycle (or reads through the store), and presents the
 * answer; the rules (dedup, series cancel, which state a change needs, timers) are the
 * lifecycle's.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../clock.js';
import type { HandlerRegistry } from '../../handlers/registry.js';
import type { ChangeResult, Placement } from '../../lifecycle/change.js';
import type { Lifecycle } from '../../lifecycle/lifecycle.js';
import type { RunAtCursor, Task, TaskStore } from '../../store/task-store.js';
import { checkCron, CronError, nextOccurrence } from '../../recurrence.js';
import type { Summary as SummaryReader } from '../../summary.js';
import { canonicalZone, parseRunAt, TimeInputError } from '../../time.js';
import { jsonProblem } from '../../validation.js';
import { badRequest, conflict, HttpError, notFound } from '../errors.js';
import { present } from '../present.js';
import {
  ConflictJson,
  CreateTaskBody,
  DEFAULT_PAGE,
  ErrorJson,
  IdParams,
  KeyParams,
  PendingPage,
  PendingQuery,
  RecentPage,
  RecentQuery,
  RescheduleBody,
  Summary,
  TaskJson,
} from '../schemas.js';

/** Payloads are kept small: a task names its work, it does not carry it. */
export const MAX_PAYLOAD_BYTES = 64 * 1024;
/**
 * A list page is bounded in bytes too: eight clients asking for 1000 tasks of 60 KB each would
 * otherwise hold half a gigabyte and stall every timer; a small page also keeps each step of its
 * serialization short. A page that reaches it is cut short, with
 * a nextCursor; each task counts its stored payload, key and error plus PAGE_ROW_BYTES.
 */
export const PAGE_MAX_BYTES = 256 * 1024;
const PAGE_ROW_BYTES = 512;
/** Deeper JSON is refused before anything walks it (MariaDB's JSON functions stop at 32 levels). */
export const MAX_PAYLOAD_DEPTH = 32;

export interface TaskRoutesOptions {
  /** Reads. */
  store: TaskStore;
  /** Changes. */
  lifecycle: Lifecycle;
  registry: HandlerRegistry;
  summary: SummaryReader;
  clock: Clock;
  /** TIMEZONE: the zone of a naive runAt when the request names none. */
  timezone: string;
  /** MAX_ATTEMPTS: the default for a task that does not say. */
  maxAttempts: number;
}

function zoneOf(requested: string | undefined, fallback: string): string {
  if (requested === undefined) return fallback;
  const zone = canonicalZone(requested);
  if (zone === undefined)
    throw badRequest('body/timezone', `must be an IANA time zone such as Asia/Shanghai, got ${JSON.stringify(requested)}`);
  return zone;
}

/**
 * The instant a request asks for: exactly one of runAt and delayMs, or neither for a recurring
 * task, which then starts at its cron expression's next occurrence.
 */
function instantOf(body: { runAt?: string | number; delayMs?: number; cron?: string }, zone: string, now: number): number {
  if (body.runAt !== undefined && body.delayMs !== undefined) throw badRequest('body/runAt', 'and body/delayMs cannot both be given');
  if (body.delayMs !== undefined) return now + body.delayMs;
  if (body.runAt === undefined) {
    if (body.cron === undefined) throw badRequest('body/runAt', 'or body/delayMs is required');
    const first = nextOccurrence(body.cron, zone, now);
    if (first === null) throw badRequest('body/cron', 'never matches a time to come');
    return first;
  }
  try {
    return parseRunAt(body.runAt, zone, now);
  } catch (error) {
    if (error instanceof TimeInputError) throw badRequest('body/runAt', error.message);
    throw error;
  }
}

/** A cron expression the service can follow, or a 400 naming the field. */
function checkedCron(cron: string | undefined): string | null {
  if (cron === undefined) return null;
  try {
    checkCron(cron);
    return cron.trim();
  } catch (error) {
    if (error instanceof CronError) throw badRequest('body/cron', error.message);
    throw error;
  }
}

const CURSOR_PATTERN = /^(\d{1,16})\.(\d{1,16})$/;

function encodeCursor(task: Task): string {
  return Buffer.from(`${task.runAt}.${task.id}`).toString('base64url');
}

function decodeCursor(cursor: string): RunAtCursor {
  const match = CURSOR_PATTERN.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (match === null) throw badRequest('querystring/cursor', 'is not a nextCursor from a previous page');
  return { runAt: Number(match[1]), id: Number(match[2]) };
}

const taskResponses = { 200: TaskJson, 400: ErrorJson, 401: ErrorJson, 404: ErrorJson, 409: ConflictJson };

export const taskRoutes: FastifyPluginAsync<TaskRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { store, lifecycle, registry, clock } = options;

  async function byId(id: number): Promise<Task> {
    const task = await store.get(id);
    if (task === undefined) throw notFound(`task ${id}`);
    return task;
  }

  async function byKey(key: string): Promise<Task> {
    const task = await store.getByKey(key);
    if (task === undefined) throw notFound(`task with key ${JSON.stringify(key)}`);
    return task;
  }

  /** The task after a change, or the 409 (with the task as it is now) or 404 the change met. */
  function changed(result: ChangeResult, id: number, refused: (task: Task) => string): Task {
    if (result.outcome === 'missing') throw notFound(`task ${id}`);
    if (result.outcome === 'refused') throw conflict(refused(result.task), present(result.task));
    return result.task;
  }

  async function cancel(task: Task): Promise<Task> {
    return changed(
      await lifecycle.cancel(task),
      task.id,
      (now) => `task ${task.id} is ${now.status}; only a pending task can be cancelled`,
    );
  }

  /** Where a reschedule or retry asks the task to go; a retry without a time runs now. */
  const placement =
    (body: RescheduleBody, how: 'reschedule' | 'retry') =>
    (task: Task, now: number): Placement => {
      const zone = zoneOf(body.timezone, task.timezone);
      const runAt = how === 'retry' && body.runAt === undefined && body.delayMs === undefined ? now : instantOf(body, zone, now);
      return { runAt, timezone: zone };
    };

  async function move(id: number, body: RescheduleBody, how: 'reschedule' | 'retry'): Promise<Task> {
    const task = await byId(id);
    const result =
      how === 'retry' ? await lifecycle.retry(task, placement(body, how)) : await lifecycle.reschedule(task, placement(body, how));
    const only = how === 'retry' ? 'only a failed task can be retried' : 'only a pending task can be rescheduled';
    return changed(result, id, (now) => `task ${id} is ${now.status}; ${only}`);
  }

  app.post(
    '/tasks',
    {
      schema: {
        summary: 'Schedule a task',
        tags: ['tasks'],
        description:
          'Answers 201 with the new task, 200 with the existing one when `key` repeats with the same type, payload and instant, 409 when it repeats with anything else.',
        body: CreateTaskBody,
        response: { 200: TaskJson, 201: TaskJson, 400: ErrorJson, 401: ErrorJson, 409: ConflictJson },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const now = clock.now();
      if (registry.get(body.type) === undefined) {
        throw badRequest('body/type', `is not a known task type: ${JSON.stringify(body.type)} (known: ${registry.types.join(', ')})`);
      }
      const payload = body.payload ?? {};
      const unfit = jsonProblem(payload, MAX_PAYLOAD_DEPTH);
      if (unfit !== undefined) throw badRequest('body/payload', unfit);
      if (body.key !== undefined && !body.key.isWellFormed()) {
        throw badRequest('body/key', 'must not contain a lone surrogate (it is not valid Unicode)');
      }
      const zone = zoneOf(body.timezone, options.timezone);
      const cron = checkedCron(body.cron);
      const runAt = instantOf(body, zone, now);
      const problem = registry.payloadProblem(body.type, payload, 'body/payload');
      if (problem !== undefined) throw new HttpError(400, 'PUNCTUAL_BAD_REQUEST', problem);
      if (Buffer.byteLength(JSON.stringify(payload)) > MAX_PAYLOAD_BYTES) {
        throw badRequest('body/payload', `must not be larger than ${MAX_PAYLOAD_BYTES} bytes as JSON`);
      }

      const result = await lifecycle.create(
        {
          task: {
            key: body.key ?? null,
            type: body.type,
            payload,
            runAt,
            timezone: zone,
            maxAttempts: body.maxAttempts ?? options.maxAttempts,
            misfire: body.misfire ?? 'run',
            cron,
          },
          delayMs: body.delayMs,
        },
        now,
      );
      if (result.outcome === 'conflict') {
        throw conflict(
          `key ${JSON.stringify(result.task.key)} already names task ${result.task.id} with a different type, payload, runAt or cron`,
          present(result.task),
        );
      }
      return reply.status(result.outcome === 'created' ? 201 : 200).send(present(result.task));
    },
  );

  app.get(
    '/tasks/pending',
    {
      schema: {
        summary: 'List pending tasks, soonest first',
        tags: ['tasks'],
        querystring: PendingQuery,
        response: { 200: PendingPage, 400: ErrorJson, 401: ErrorJson },
      },
    },
    async (request) => {
      const { type, limit = DEFAULT_PAGE, cursor } = request.query;
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      const page = await store.listPendingWithin({ type, limit, after, maxBytes: PAGE_MAX_BYTES, rowBytes: PAGE_ROW_BYTES });
      const last = page.tasks[page.tasks.length - 1];
      return { tasks: page.tasks.map(present), nextCursor: page.more && last !== undefined ? encodeCursor(last) : null };
    },
  );

  app.get(
    '/tasks/recent',
    {
      schema: {
        summary: 'The latest tasks to finish, newest first',
        tags: ['tasks'],
        querystring: RecentQuery,
        response: { 200: RecentPage, 400: ErrorJson, 401: ErrorJson },
      },
    },
    async (request) => {
      const { status = 'done', limit = 50 } = request.query;
      return { tasks: (await store.listFinished(status, limit)).map(present) };
    },
  );

  app.get(
    '/tasks/summary',
    {
      schema: {
        summary: 'The backlog and the lateness at a glance',
        tags: ['tasks'],
        response: { 200: Summary, 401: ErrorJson },
      },
    },
    () => options.summary.read(),
  );

  app.get(
    '/tasks/:id',
    { schema: { summary: 'Read a task', tags: ['tasks'], params: IdParams, response: taskResponses } },
    async (request) => present(await byId(request.params.id)),
  );

  app.post(
    '/tasks/:id/cancel',
    { schema: { summary: 'Cancel a pending task', tags: ['tasks'], params: IdParams, response: taskResponses } },
    async (request) => present(await cancel(await byId(request.params.id))),
  );

  app.post(
    '/tasks/:id/reschedule',
    {
      schema: {
        summary: 'Move a pending task to another time',
        tags: ['tasks'],
        params: IdParams,
        body: RescheduleBody,
        response: taskResponses,
      },
    },
    async (request) => present(await move(request.params.id, request.body, 'reschedule')),
  );

  app.post(
    '/tasks/:id/retry',
    {
      schema: {
        summary: 'Run a failed task again',
        description: 'failed → pending with its attempts reset, at `runAt`/`delayMs` if given, else now.',
        tags: ['tasks'],
        params: IdParams,
        body: RescheduleBody,
        response: taskResponses,
      },
      // The body is optional: none means "now".
      preValidation: async (request) => {
        request.body ??= {};
      },
    },
    async (request) => present(await move(request.params.id, request.body, 'retry')),
  );

  app.get(
    '/tasks/by-key/:key',
    { schema: { summary: 'Read a task by its key', tags: ['tasks'], params: KeyParams, response: taskResponses } },
    async (request) => present(await byKey(request.params.key)),
  );

  app.post(
    '/tasks/by-key/:key/cancel',
    { schema: { summary: 'Cancel a pending task by its key', tags: ['tasks'], params: KeyParams, response: taskResponses } },
    async (request) => present(await cancel(await byKey(request.params.key))),
  );
};
