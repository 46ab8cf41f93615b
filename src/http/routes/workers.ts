/**
 * The pull workers' routes (worker role; admin may too): POST /workers/lease answers due tasks of
 * worker types leased to the caller, or holds the request (long poll) until one falls due or
 * `waitMs` passes; ack, nack and extend settle a leased task by its lease token, and
 * POST /workers/ack acks many in one request (acks commit in groups of up to 200). A stale or
 * foreign token is a 409 and changes nothing (the lease is the condition of every settle). The
 * waiting is the pull hub's (dispatch/pull-hub.ts); the transitions are the lifecycle's (pull.ts).
 * See docs/workers.md.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../time/clock.js';
import { parseRunAt, TimeInputError, toIsoLocal, toIsoUtc } from '../../time/zones.js';
import type { HandlerRegistry } from '../../handlers/registry.js';
import { idempotencyKey } from '../../handlers/webhook.js';
import { runOf } from '../../dispatch/outcomes.js';
import type { Tracing } from '../../observability/tracing.js';
import type { PullLifecycle, SettleResult } from '../../lifecycle/pull.js';
import type { Task } from '../../store/task-types.js';
import { TooManyWaiting, type LeasedTask, type PullHub } from '../../dispatch/pull-hub.js';
import { ErrorJson } from '../../contract/errors.js';
import { IdParams, TaskJson } from '../../contract/tasks.js';
import {
  AckBody,
  AckManyAnswer,
  AckManyBody,
  ExtendBody,
  LeaseAnswer,
  LeaseBody,
  NackBody,
  WorkersJson,
  type LeasedTaskJson,
} from '../../contract/workers.js';
import type { TaskStore } from '../../store/task-store.js';
import { StatusCountsReader } from '../../store/status-counts.js';
import { lateFrom } from '../../store/rows.js';
import { badRequest, HttpError, notFound } from '../errors.js';
import { storedInstant } from '../instants.js';
import { present } from '../present.js';

export interface WorkerRoutesOptions {
  hub: PullHub;
  /** Reads the worker types' counts (GET /workers). */
  store: TaskStore;
  pull: PullLifecycle;
  registry: HandlerRegistry;
  clock: Clock;
  /** WORKER_MAX_LEASE_MS. */
  maxLeaseMs: number;
  /** WORKER_MAX_WAITING_PER_TOKEN: waiting lease requests of one token at once. */
  maxWaitingPerToken: number;
  /** A lease's span: the context the worker continues (traceparent, tracestate). */
  tracing?: Tracing;
}

/**
 * A leased task as its worker gets it. `trace`: the lease's span (a run of the task's kept trace,
 * attempt as the lease counted it), ended as it is handed over; its context is what the worker
 * continues, null when the task keeps none and spans are not recorded.
 */
function leasedJson({ task, leaseToken, leaseUntil }: LeasedTask, tracing: Tracing | undefined, now: number): LeasedTaskJson {
  const span = tracing?.runSpan({ ...runOf(task), attempt: task.attempts }, now, now - lateFrom(task));
  span?.end('leased');
  return {
    id: task.id,
    key: task.key,
    type: task.type,
    payload: task.payload,
    runAt: toIsoUtc(task.runAt),
    runAtLocal: toIsoLocal(task.runAt, task.timezone),
    timezone: task.timezone,
    attempt: task.attempts,
    maxAttempts: task.maxAttempts,
    leaseToken,
    leaseUntil: toIsoUtc(leaseUntil),
    idempotencyKey: idempotencyKey(task),
    traceparent: span?.headers.traceparent ?? null,
    tracestate: span?.headers.tracestate ?? null,
  };
}

const settleResponses = { 200: TaskJson, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson, 404: ErrorJson, 409: ErrorJson };

export const workerRoutes: FastifyPluginAsync<WorkerRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { hub, pull, registry, clock, maxLeaseMs } = options;
  const counts = new StatusCountsReader(options.store, clock);

  app.get(
    '/workers',
    {
      schema: {
        summary: 'The worker types: their leased and pending tasks, and the lease requests waiting here',
        tags: ['workers'],
        response: { 200: WorkersJson, 401: ErrorJson },
      },
    },
    async () => ({
      waitingHere: hub.waiting,
      types: await Promise.all(
        [...registry.workerTypes].sort().map(async (type) => {
          const { counts: of } = await counts.read({ type });
          return { type, leased: of.running, pending: of.pending, failed: of.failed };
        }),
      ),
    }),
  );

  function leaseMsOf(value: number, field: string): number {
    if (value > maxLeaseMs) throw badRequest(field, `must not be more than ${maxLeaseMs} (WORKER_MAX_LEASE_MS)`);
    return value;
  }

  /** Lease requests waiting now, by token name. */
  const waitingOf = new Map<string, number>();
  const staleText = (id: number, what: string) =>
    `task ${id} is not leased to this token (${what} refused): the lease ran out, was settled, or is another worker's`;

  function settled(result: SettleResult, id: number, what: string): Task {
    if (result.kind === 'missing') throw notFound(`task ${id}`);
    // Nothing of the task: a worker learns only that the lease is not its own.
    if (result.kind === 'stale') throw new HttpError(409, 'PUNCTUAL_NOT_YOUR_LEASE', staleText(id, what));
    return result.task;
  }

  app.post(
    '/workers/lease',
    {
      schema: {
        summary: 'Lease due tasks of worker types; with waitMs, wait for one to fall due (long poll)',
        tags: ['workers'],
        body: LeaseBody,
        response: { 200: LeaseAnswer, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson, 503: ErrorJson },
      },
    },
    async (request, reply) => {
      const { types, max = 1, leaseMs = 30_000, waitMs = 0 } = request.body;
      const workerTypes = new Set(registry.workerTypes);
      types.forEach((type, index) => {
        if (!workerTypes.has(type)) throw badRequest(`body/types/${index}`, `${JSON.stringify(type)} is not a worker type (WORKER_TYPES)`);
      });
      // One token's waits are capped, so one worker fleet cannot take every place (nor every connection).
      const token = request.tokenName ?? 'open';
      const waiting = waitingOf.get(token) ?? 0;
      if (waitMs > 0 && waiting >= options.maxWaitingPerToken) {
        void reply.header('retry-after', '1');
        throw new HttpError(
          503,
          'PUNCTUAL_TOO_MANY_WAITING',
          `${waiting} lease requests of this token are waiting already (WORKER_MAX_WAITING_PER_TOKEN)`,
        );
      }
      if (waitMs > 0) waitingOf.set(token, waiting + 1);
      // The client went away while waiting: its place is given up, and nothing is leased to it.
      const gone = new AbortController();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) gone.abort();
      });
      try {
        const leased = await hub.lease(
          { types: [...new Set(types)], max, leaseMs: leaseMsOf(leaseMs, 'body/leaseMs'), waitMs },
          gone.signal,
        );
        const now = options.clock.now();
        return { tasks: leased.map((lease) => leasedJson(lease, options.tracing, now)) };
      } catch (error) {
        if (error instanceof TooManyWaiting) {
          void reply.header('retry-after', '1');
          throw new HttpError(503, 'PUNCTUAL_TOO_MANY_WAITING', error.message);
        }
        throw error;
      } finally {
        if (waitMs > 0) {
          const left = (waitingOf.get(token) ?? 1) - 1;
          if (left <= 0) waitingOf.delete(token);
          else waitingOf.set(token, left);
        }
      }
    },
  );

  app.post(
    '/tasks/:id/ack',
    {
      schema: {
        summary: 'A pull worker finished its leased task: done',
        tags: ['workers'],
        params: IdParams,
        body: AckBody,
        response: settleResponses,
      },
    },
    async (request) => present(settled(await pull.ack(request.params.id, request.body.leaseToken), request.params.id, 'ack'), request.role),
  );

  app.post(
    '/workers/ack',
    {
      schema: {
        summary: 'A pull worker finished several leased tasks: each done, in one request (acks commit in groups of up to 200)',
        tags: ['workers'],
        body: AckManyBody,
        response: { 200: AckManyAnswer, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson },
      },
    },
    async (request) => {
      const { acks } = request.body;
      const seen = new Set<number>();
      acks.forEach((ack, index) => {
        if (seen.has(ack.id)) throw badRequest(`body/acks/${index}/id`, `task ${ack.id} is acked twice in this request`);
        seen.add(ack.id);
      });
      // Acks that arrive together share one transaction (lifecycle/pull.ts): these all do.
      const outcomes = await Promise.all(acks.map((ack) => pull.ack(ack.id, ack.leaseToken)));
      const results = outcomes.map((result, i) => {
        const id = acks[i]!.id;
        if (result.kind === 'settled') return { id, status: 200 };
        return result.kind === 'missing'
          ? { id, status: 404, message: notFound(`task ${id}`).message }
          : { id, status: 409, message: staleText(id, 'ack') };
      });
      const acked = results.filter((result) => result.status === 200).length;
      return { results, acked, refused: results.length - acked };
    },
  );

  app.post(
    '/tasks/:id/nack',
    {
      schema: {
        summary: 'A pull worker failed its leased task: retried (with backoff, or at retryAt) or failed for good (permanent)',
        tags: ['workers'],
        params: IdParams,
        body: NackBody,
        response: settleResponses,
      },
    },
    async (request) => {
      const { leaseToken, error, retryAt, permanent } = request.body;
      let at: number | undefined;
      if (retryAt !== undefined) {
        try {
          at = storedInstant('body/retryAt', parseRunAt(retryAt, 'UTC', clock.now()));
        } catch (problem) {
          if (problem instanceof TimeInputError) throw badRequest('body/retryAt', problem.message);
          throw problem;
        }
      }
      const result = await pull.nack(request.params.id, leaseToken, error, { retryAt: at, permanent });
      return present(settled(result, request.params.id, 'nack'), request.role);
    },
  );

  app.post(
    '/tasks/:id/extend',
    {
      schema: {
        summary: 'A pull worker needs longer: its lease runs leaseMs from now',
        tags: ['workers'],
        params: IdParams,
        body: ExtendBody,
        response: settleResponses,
      },
    },
    async (request) => {
      const { leaseToken, leaseMs } = request.body;
      const result = await pull.extend(request.params.id, leaseToken, leaseMsOf(leaseMs, 'body/leaseMs'));
      return present(settled(result, request.params.id, 'extend'), request.role);
    },
  );
};
