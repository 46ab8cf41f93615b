/**
 * The task routes: create, list (pending by cursor; any status by offset, with counts), read,
 * cancel, reschedule and retry (by id or by key).
 * A route parses its request, calls the lifecycle (or reads through the store), and presents the
 * answer; the rules (dedup, series cancel, which state a change needs, timers) are the
 * lifecycle's.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../time/clock.js';
import type { HandlerRegistry } from '../../handlers/registry.js';
import type { ChangeResult, Placement } from '../../lifecycle/change.js';
import type { Lifecycle } from '../../lifecycle/lifecycle.js';
import type { TaskStore } from '../../store/task-store.js';
import type { ListKey, RunAtCursor, Task } from '../../store/task-types.js';
import type { SummaryReader } from '../../store/summary.js';
import { StatusCountsReader } from '../../store/status-counts.js';
import { toIsoUtc } from '../../time/zones.js';
import { checkedPayload, conflictMessage, createFromBody, instantOf, zoneOf } from '../create-input.js';
import { queryInstant, storedInstant } from '../instants.js';
import { endOnError, keepTrace, startCreateTrace } from '../create-trace.js';
import type { Tracing } from '../../observability/tracing.js';
import { badRequest, conflict, notFound, pastRunAt } from '../errors.js';
import { present } from '../present.js';
import type { Role } from '../../contract/auth.js';
import { ErrorJson } from '../../contract/errors.js';
import { DEFAULT_PAGE, MAX_LIST_OFFSET, PAST_TOLERANCE_MS, TAG_PATTERN } from '../../contract/limits.js';

const TAG_REGEXP = new RegExp(TAG_PATTERN);
import {
  ConflictJson,
  CountsQuery,
  CreateTaskBody,
  IdParams,
  KeyParams,
  ListPage,
  PayloadBody,
  ListQuery,
  PendingPage,
  PendingQuery,
  RecentPage,
  RecentQuery,
  RescheduleBody,
  SearchPage,
  SearchQuery,
  StatusCounts,
  Summary,
  TaskJson,
} from '../../contract/tasks.js';
/**
 * A list page is bounded in bytes too: eight clients asking for 1000 tasks of 60 KB each would
 * otherwise hold half a gigabyte and stall every timer; a small page also keeps each step of its
 * serialization short. A page that reaches it is cut short, with
 * a nextCursor; each task counts its stored payload, key and error plus PAGE_ROW_BYTES.
 */
export const PAGE_MAX_BYTES = 256 * 1024;
const PAGE_ROW_BYTES = 512;

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
  /** Traces: a create's span, and the context its task keeps (none: contexts are not read). */
  tracing?: Tracing;
}

const CURSOR_PATTERN = /^(\d{1,16})\.(\d{1,16})$/;

function encodeCursor(task: Task): string {
  return Buffer.from(`${task.runAt}.${task.id}`).toString('base64url');
}

function decodeCursor(cursor: string): RunAtCursor {
  const match = CURSOR_PATTERN.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (match === null) throw badRequest('querystring/cursor', 'is not a nextCursor from a previous page');
  return { runAt: storedInstant('querystring/cursor', Number(match[1])), id: Number(match[2]) };
}

const LIST_CURSOR = /^(o|f)\.(-?\d{1,16})\.(\d{1,16})(?:\.(\d{1,16}))?$/;

/** A list page's edge as a cursor: `o.runAt.id` for open tasks, `f.finishedAt.runAt.id` for finished ones. */
function encodeListCursor(task: Task, finished: boolean): string {
  const text = finished ? `f.${task.finishedAt ?? 0}.${task.runAt}.${task.id}` : `o.${task.runAt}.${task.id}`;
  return Buffer.from(text).toString('base64url');
}

function decodeListCursor(field: string, cursor: string, finished: boolean): ListKey {
  const match = LIST_CURSOR.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (match === null || (match[1] === 'f') !== finished || (finished && match[4] === undefined)) {
    throw badRequest(`querystring/${field}`, 'is not a cursor of a page of this status (nextCursor or prevCursor)');
  }
  if (!finished) return { runAt: storedInstant(`querystring/${field}`, Number(match[2])), id: Number(match[3]) };
  return { finishedAt: Number(match[2]), runAt: Number(match[3]), id: Number(match[4]) };
}

const finishedStatus = (status: string) => status !== 'pending' && status !== 'running';
const listKey = (task: Task): ListKey => ({ runAt: task.runAt, id: task.id, finishedAt: task.finishedAt ?? 0 });

/** The list's and the counts' filters, from the query. */
function listFilters(query: {
  type?: string;
  tag?: string;
  keyPrefix?: string;
  group?: string;
  series?: number;
  dueFrom?: string;
  dueUntil?: string;
}) {
  const { type, tag, keyPrefix, group, series } = query;
  return {
    type,
    tag,
    keyPrefix,
    group,
    series,
    from: queryInstant('dueFrom', query.dueFrom),
    until: queryInstant('dueUntil', query.dueUntil),
  };
}

const taskResponses = { 200: TaskJson, 400: ErrorJson, 401: ErrorJson, 404: ErrorJson, 409: ConflictJson };

export const taskRoutes: FastifyPluginAsync<TaskRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { store, lifecycle, clock } = options;
  const input = { registry: options.registry, timezone: options.timezone, maxAttempts: options.maxAttempts };
  const counts = new StatusCountsReader(store, clock);

  async function byId(id: number): Promise<Task> {
    const task = await store.reads.get(id);
    if (task === undefined) throw notFound(`task ${id}`);
    return task;
  }

  async function byKey(key: string): Promise<Task> {
    const task = await store.reads.getByKey(key);
    if (task === undefined) throw notFound(`task with key ${JSON.stringify(key)}`);
    return task;
  }

  /** The task after a change, or the 409 (with the task as it is now, as `role` sees it) or 404 the change met. */
  function changed(result: ChangeResult, id: number, refused: (task: Task) => string, role: Role | undefined): Task {
    if (result.outcome === 'missing') throw notFound(`task ${id}`);
    if (result.outcome === 'refused') throw conflict(refused(result.task), present(result.task, role));
    return result.task;
  }

  async function cancel(task: Task, role: Role | undefined): Promise<Task> {
    return changed(
      await lifecycle.cancel(task),
      task.id,
      (now) => `task ${task.id} is ${now.status}; only a pending task can be cancelled`,
      role,
    );
  }

  /**
   * A page by keyset (after, before, last, at), at any depth: its place in the list (offset) is
   * counted from the page's first task, its cursors taken from its edges.
   */
  async function listByKey(
    status: Task['status'],
    filters: ReturnType<typeof listFilters>,
    query: { after?: string; before?: string; last?: boolean; at?: string },
    limit: number,
    role: Role | undefined,
  ) {
    const finished = finishedStatus(status);
    let key: ListKey | undefined;
    let forward = true;
    if (query.after !== undefined) key = decodeListCursor('after', query.after, finished);
    else if (query.before !== undefined) [key, forward] = [decodeListCursor('before', query.before, finished), false];
    else if (query.last === true) forward = false;
    else if (query.at !== undefined) {
      const instant = queryInstant('at', query.at)!;
      // Just before the first task due at the instant (or finished at it, newest first).
      key = finished ? { finishedAt: instant + 1, runAt: 0, id: 0 } : { runAt: instant - 1, id: Number.MAX_SAFE_INTEGER };
    }
    const sizes = { limit, maxBytes: PAGE_MAX_BYTES, rowBytes: PAGE_ROW_BYTES };
    const [page, reading] = await Promise.all([store.reads.listSeek(status, filters, { key, forward, ...sizes }), counts.read(filters)]);
    const [first, last] = [page.tasks[0], page.tasks[page.tasks.length - 1]];
    const total = reading.counts[status];
    const place = first === undefined ? (forward ? total : 0) : await store.reads.countBefore(status, filters, listKey(first));
    // Read backwards from a key, the key's own task comes after the page; from the end, nothing does.
    const more = forward ? page.more : key !== undefined;
    const earlier = forward ? place > 0 : page.more;
    const next = place + page.tasks.length;
    return {
      tasks: page.tasks.map((task) => present(task, role)),
      total,
      offset: place,
      nextOffset: more && next <= MAX_LIST_OFFSET ? next : null,
      nextCursor: more && last !== undefined ? encodeListCursor(last, finished) : null,
      prevCursor: earlier && first !== undefined ? encodeListCursor(first, finished) : null,
    };
  }

  /** Where a reschedule or retry asks the task to go; a retry without a time runs now. */
  const placement =
    (body: RescheduleBody, how: 'reschedule' | 'retry') =>
    (task: Task, now: number): Placement => {
      const zone = zoneOf(body.timezone, task.timezone);
      const runAt = how === 'retry' && body.runAt === undefined && body.delayMs === undefined ? now : instantOf(body, zone, now);
      if (runAt < now - PAST_TOLERANCE_MS && body.allowPast !== true) throw pastRunAt('body/runAt', runAt, now);
      return { runAt, timezone: zone };
    };

  async function move(id: number, body: RescheduleBody, how: 'reschedule' | 'retry', role: Role | undefined): Promise<Task> {
    const task = await byId(id);
    const result =
      how === 'retry' ? await lifecycle.retry(task, placement(body, how)) : await lifecycle.reschedule(task, placement(body, how));
    const only = how === 'retry' ? 'only a failed task can be retried' : 'only a pending task can be rescheduled';
    return changed(result, id, (now) => `task ${id} is ${now.status}; ${only}`, role);
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
      const now = clock.now();
      const span = startCreateTrace(options.tracing, '/tasks', request);
      try {
        const result = await lifecycle.create(keepTrace(span, createFromBody(request.body, input, now)), now);
        if (result.outcome === 'conflict') {
          throw conflict(conflictMessage(result.task), present(result.task, request.role));
        }
        if (result.outcome === 'replaced') request.replaced = [result.task.id];
        const status = result.outcome === 'created' ? 201 : 200;
        span?.end(status, [result.task.id]);
        return reply.status(status).send(present(result.task, request.role));
      } catch (error) {
        endOnError(span, error);
        throw error;
      }
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
      const { type, tag, keyPrefix, limit = DEFAULT_PAGE, cursor } = request.query;
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      const page = await store.reads.listPendingWithin({
        type,
        tag,
        keyPrefix,
        limit,
        after,
        maxBytes: PAGE_MAX_BYTES,
        rowBytes: PAGE_ROW_BYTES,
      });
      const last = page.tasks[page.tasks.length - 1];
      return {
        tasks: page.tasks.map((task) => present(task, request.role)),
        nextCursor: page.more && last !== undefined ? encodeCursor(last) : null,
      };
    },
  );

  app.get(
    '/tasks',
    {
      schema: {
        summary: 'List the tasks in one status, a page at a time, with their count',
        description:
          "pending and running soonest first, finished ones newest first; filtered by type, tag and key prefix. Paged by offset (a console's page numbers) up to an offset of " +
          `${MAX_LIST_OFFSET}; a page also stops at about 256 KiB, so follow nextOffset.`,
        tags: ['tasks'],
        querystring: ListQuery,
        response: { 200: ListPage, 400: ErrorJson, 401: ErrorJson },
      },
    },
    async (request) => {
      const { status = 'pending', limit = 50, offset = 0, after, before, at } = request.query;
      const toLast = request.query.last === true;
      const filters = listFilters(request.query);
      const ways = [request.query.offset, after, before, toLast ? true : undefined, at].filter((way) => way !== undefined);
      if (ways.length > 1) throw badRequest('querystring', 'must name at most one of offset, after, before, last, at');
      if (after !== undefined || before !== undefined || toLast || at !== undefined) {
        return listByKey(status, filters, request.query, limit, request.role);
      }
      const [page, reading] = await Promise.all([
        store.reads.listByStatus(status, filters, { offset, limit, maxBytes: PAGE_MAX_BYTES, rowBytes: PAGE_ROW_BYTES }),
        counts.read(filters),
      ]);
      const next = offset + page.tasks.length;
      const [first, last] = [page.tasks[0], page.tasks[page.tasks.length - 1]];
      return {
        tasks: page.tasks.map((task) => present(task, request.role)),
        total: reading.counts[status],
        offset,
        nextOffset: page.more && next <= MAX_LIST_OFFSET ? next : null,
        nextCursor: page.more && last !== undefined ? encodeListCursor(last, finishedStatus(status)) : null,
        prevCursor: offset > 0 && first !== undefined ? encodeListCursor(first, finishedStatus(status)) : null,
      };
    },
  );

  app.get(
    '/tasks/search',
    {
      schema: {
        summary: 'Find tasks by id, key, key start, key part or tag',
        description:
          "One box for the console: the task with id q, those whose key is q or starts with it, those whose key's last part after a colon is q (`SN104500` finds `close_order:SN104500`), and those tagged q; each on an index of its own.",
        tags: ['tasks'],
        querystring: SearchQuery,
        response: { 200: SearchPage, 400: ErrorJson, 401: ErrorJson },
      },
    },
    async (request) => {
      const text = request.query.q.trim();
      if (text === '') throw badRequest('querystring/q', 'must not be blank');
      const found = await store.reads.search(text, request.query.limit ?? 20, TAG_REGEXP.test(text));
      return { tasks: found.tasks.map((task) => present(task, request.role)), tagged: found.tagged };
    },
  );

  app.get(
    '/tasks/counts',
    {
      schema: {
        summary: 'How many tasks are in each status',
        description: 'filtered by type, tag and key prefix as GET /tasks; one reading is shared for 1.5 s.',
        tags: ['tasks'],
        querystring: CountsQuery,
        response: { 200: StatusCounts, 400: ErrorJson, 401: ErrorJson },
      },
    },
    async (request) => {
      const reading = await counts.read(listFilters(request.query));
      return { counts: reading.counts, countedAt: toIsoUtc(reading.at) };
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
      return { tasks: (await store.reads.listFinished(status, limit)).map((task) => present(task, request.role)) };
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
    async (request) => present(await byId(request.params.id), request.role),
  );

  app.post(
    '/tasks/:id/cancel',
    { schema: { summary: 'Cancel a pending task', tags: ['tasks'], params: IdParams, response: taskResponses } },
    async (request) => present(await cancel(await byId(request.params.id), request.role), request.role),
  );

  app.post(
    '/tasks/:id/release-lease',
    {
      schema: {
        summary: 'Release a stuck lease (admin)',
        description:
          'A running task whose lease ran out (its run never reported): on record as lost, then pending again and due now, or failed on its last attempt; what the reconcile does within a minute, now. 409 while its lease has not run out.',
        tags: ['tasks'],
        params: IdParams,
        response: taskResponses,
      },
    },
    async (request) => {
      const task = await byId(request.params.id);
      const { released } = await lifecycle.releaseLease(task);
      const now = await byId(task.id);
      if (!released) {
        const why = now.status === 'running' ? 'its lease has not run out' : `it is ${now.status}`;
        throw conflict(`task ${task.id} holds no stuck lease: ${why}`, present(now, request.role));
      }
      return present(now, request.role);
    },
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
    async (request) => present(await move(request.params.id, request.body, 'reschedule', request.role), request.role),
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
    async (request) => present(await move(request.params.id, request.body, 'retry', request.role), request.role),
  );

  app.put(
    '/tasks/:id/payload',
    {
      schema: {
        summary: "Replace a pending task's payload",
        description:
          "Checked against the task type's schema as a create's is; its time, key and tags stay. 409 when the task is no longer pending.",
        tags: ['tasks'],
        params: IdParams,
        body: PayloadBody,
        response: taskResponses,
      },
    },
    async (request) => {
      const task = await byId(request.params.id);
      const payload = checkedPayload(options.registry, task.type, request.body.payload, 'body/payload');
      const result = await lifecycle.editPayload(task, payload);
      return present(
        changed(result, task.id, (now) => `task ${task.id} is ${now.status}; only a pending task's payload can be changed`, request.role),
        request.role,
      );
    },
  );

  app.delete(
    '/tasks/:id',
    {
      schema: {
        summary: 'Delete a task that is not running, with its runs',
        description:
          'Answers the task as it was. 409 while it runs, and for the first task of a recurring series that goes on (cancel the series first).',
        tags: ['tasks'],
        params: IdParams,
        response: taskResponses,
      },
    },
    async (request) => {
      const task = await byId(request.params.id);
      const result = await lifecycle.delete(task);
      if (result.outcome === 'missing') throw notFound(`task ${task.id}`);
      if (result.outcome === 'refused') {
        const why = result.task.status === 'running' ? 'it is running' : 'it is the first task of a recurring series that goes on';
        throw conflict(`task ${task.id} cannot be deleted: ${why}`, present(result.task, request.role));
      }
      return present(result.task, request.role);
    },
  );

  app.get(
    '/tasks/by-key/:key',
    { schema: { summary: 'Read a task by its key', tags: ['tasks'], params: KeyParams, response: taskResponses } },
    async (request) => present(await byKey(request.params.key), request.role),
  );

  app.post(
    '/tasks/by-key/:key/cancel',
    { schema: { summary: 'Cancel a pending task by its key', tags: ['tasks'], params: KeyParams, response: taskResponses } },
    async (request) => present(await cancel(await byKey(request.params.key), request.role), request.role),
  );
};
