/**
 * The pull workers' API: POST /workers/lease (long poll), the settles of a leased task (ack,
 * nack, extend), and POST /workers/ack for the tasks of a lease done together. The routes and
 * fields are fixed: shops' worker code relies on them.
 */
import { Type, type Static } from 'typebox';
import { MAX_TYPE_LENGTH } from './limits.js';
import { RunAt } from './tasks.js';

export const MAX_LEASE_TASKS = 100;
export const MAX_WAIT_MS = 30_000;
export const MIN_LEASE_MS = 1000;
export const MAX_LEASE_TYPES = 32;
export const MAX_NACK_ERROR = 2000;
/** Acks in one POST /workers/ack: ten full leases. */
export const MAX_ACKS = 1000;

export const LeaseBody = Type.Object(
  {
    types: Type.Array(Type.String({ minLength: 1, maxLength: MAX_TYPE_LENGTH }), {
      minItems: 1,
      maxItems: MAX_LEASE_TYPES,
      description: 'worker types to lease tasks of (WORKER_TYPES, or a module declaring `effect: worker`)',
    }),
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_LEASE_TASKS, default: 1, description: 'at most this many tasks' })),
    leaseMs: Type.Optional(
      Type.Integer({
        minimum: MIN_LEASE_MS,
        default: 30_000,
        description: 'how long the tasks are leased; at most WORKER_MAX_LEASE_MS; extend it while working',
      }),
    ),
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_WAIT_MS,
        default: 0,
        description: 'with no task due, hold the request until one falls due or this long passes (then no task)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type LeaseBody = Static<typeof LeaseBody>;

export const LeasedTaskJson = Type.Object({
  id: Type.Integer(),
  key: Type.Union([Type.String(), Type.Null()]),
  type: Type.String(),
  payload: Type.Unknown(),
  runAt: Type.String({ description: 'ISO-8601 UTC' }),
  runAtLocal: Type.String({ description: "the same instant with the task zone's offset" }),
  timezone: Type.String(),
  attempt: Type.Integer({ description: '1 on the first run, 2 on the first retry…; counted by the lease' }),
  maxAttempts: Type.Integer(),
  leaseToken: Type.String({ description: 'what ack, nack and extend must name' }),
  leaseUntil: Type.String({ description: 'ISO-8601 UTC: the lease runs out then and the task is leased again' }),
  idempotencyKey: Type.String({ description: 'stable for the task across all its attempts (the same a webhook sends)' }),
  traceparent: Type.Union([Type.String(), Type.Null()], {
    description: "W3C traceparent of the lease's span in the trace of the task's create, for the worker to continue; null when there is none",
  }),
  tracestate: Type.Union([Type.String(), Type.Null()], { description: 'W3C tracestate that goes with it; null when there is none' }),
});
export type LeasedTaskJson = Static<typeof LeasedTaskJson>;

export const LeaseAnswer = Type.Object({ tasks: Type.Array(LeasedTaskJson) });

export const WorkersJson = Type.Object({
  waitingHere: Type.Integer({ description: 'lease requests waiting (long poll) in the process that answered' }),
  types: Type.Array(
    Type.Object({
      type: Type.String({ description: 'a worker type (WORKER_TYPES)' }),
      leased: Type.Integer({ description: 'its tasks leased to a worker now (running), in the whole table' }),
      pending: Type.Integer({ description: 'its tasks waiting to be leased (pending), in the whole table' }),
      failed: Type.Integer(),
    }),
  ),
});
export type WorkersJson = Static<typeof WorkersJson>;
export type LeaseAnswer = Static<typeof LeaseAnswer>;

const LeaseToken = Type.String({ minLength: 1, maxLength: 64, description: 'the leaseToken the lease answered' });

export const AckBody = Type.Object({ leaseToken: LeaseToken }, { additionalProperties: false });
export type AckBody = Static<typeof AckBody>;

export const AckManyBody = Type.Object(
  {
    acks: Type.Array(
      Type.Object(
        { id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), leaseToken: LeaseToken },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_ACKS, description: `1 to ${MAX_ACKS} leased tasks that are done, each task once` },
    ),
  },
  { additionalProperties: false },
);
export type AckManyBody = Static<typeof AckManyBody>;

/** One ack's answer: the status POST /tasks/:id/ack would give it. */
export const AckManyItem = Type.Object({
  id: Type.Integer(),
  status: Type.Integer({ description: '200 done, 404 no such task, 409 not leased to this token (nothing written)' }),
  message: Type.Optional(Type.String({ description: 'for a 404 or 409: what POST /tasks/:id/ack would say' })),
});

export const AckManyAnswer = Type.Object({
  results: Type.Array(AckManyItem, { description: 'one per ack, in the order given' }),
  acked: Type.Integer({ description: 'acks answered 200' }),
  refused: Type.Integer({ description: 'acks answered 404 or 409' }),
});
export type AckManyAnswer = Static<typeof AckManyAnswer>;

export const NackBody = Type.Object(
  {
    leaseToken: LeaseToken,
    error: Type.String({ maxLength: MAX_NACK_ERROR, description: "why it failed: kept as the task's lastError" }),
    retryAt: Type.Optional(RunAt),
    permanent: Type.Optional(Type.Boolean({ description: 'true: no retry, the task is failed for good' })),
  },
  { additionalProperties: false },
);
export type NackBody = Static<typeof NackBody>;

export const ExtendBody = Type.Object(
  { leaseToken: LeaseToken, leaseMs: Type.Integer({ minimum: MIN_LEASE_MS, description: 'the lease runs this long from now' }) },
  { additionalProperties: false },
);
export type ExtendBody = Static<typeof ExtendBody>;
