/**
 * Bulk changes (admin role): cancel or move every pending task with a tag, a key prefix or a
 * type (a cancel also by a list of ids), and retry every failed one by the same selectors. The
 * route reads the request and calls the lifecycle (src/lifecycle/bulk.ts), which works in short
 * chunks and answers the counts.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../time/clock.js';
import type { BulkMove } from '../../lifecycle/bulk.js';
import type { Lifecycle } from '../../lifecycle/lifecycle.js';
import type { Selector } from '../../store/task-types.js';
import { instantOf, zoneOf } from '../create-input.js';
import { badRequest, pastRunAt } from '../errors.js';
import { PAST_TOLERANCE_MS } from '../../contract/limits.js';
import { BulkCancelBody, BulkDeleteBody, BulkRescheduleBody, BulkResult, BulkRetryBody } from '../../contract/bulk.js';
import { ErrorJson } from '../../contract/errors.js';

export interface BulkRoutesOptions {
  lifecycle: Lifecycle;
  clock: Clock;
  /** TIMEZONE: the zone of a naive runAt when the request names none. */
  timezone: string;
}

/** Exactly one of tag, keyPrefix, type (and ids, where the body has it). */
function selectorOf(
  body: BulkCancelBody & { all?: true },
  names: readonly (keyof BulkCancelBody | 'all')[] = ['tag', 'keyPrefix', 'type'],
): Selector {
  const given = names.filter((name) => body[name] !== undefined);
  if (given.length !== 1) throw badRequest('body', `must name exactly one of ${names.join(', ')}`);
  const name = given[0]!;
  return { [name]: body[name]! } as Selector;
}

const WITH_IDS = ['tag', 'keyPrefix', 'type', 'ids'] as const;
/** A finished status's changes may also take every task in it. */
const WITH_ALL = ['tag', 'keyPrefix', 'type', 'ids', 'all'] as const;

const responses = { 200: BulkResult, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson };

export const bulkRoutes: FastifyPluginAsync<BulkRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { lifecycle, clock } = options;

  app.post(
    '/tasks/bulk/cancel',
    {
      schema: {
        summary: 'Cancel every pending task with a tag, a key prefix, a type, or an id among a list',
        description: 'In chunks of short transactions; a task that runs meanwhile is not cancelled. Repeating it is harmless.',
        tags: ['bulk'],
        body: BulkCancelBody,
        response: responses,
      },
    },
    async (request) => lifecycle.bulk(selectorOf(request.body, WITH_IDS), { kind: 'cancel' }),
  );

  app.post(
    '/tasks/bulk/retry',
    {
      schema: {
        summary: 'Run again every failed task with a tag, a key prefix, a type, or an id among a list, or all of them',
        description:
          'failed → pending, due now, attempts reset, each in its own zone; in chunks of short transactions. A task no longer failed is left alone, so repeating it is harmless.',
        tags: ['bulk'],
        body: BulkRetryBody,
        response: responses,
      },
    },
    async (request) => lifecycle.bulk(selectorOf(request.body, WITH_ALL), { kind: 'retry' }),
  );

  app.post(
    '/tasks/bulk/delete',
    {
      schema: {
        summary: 'Delete every finished task in a status with a tag, a key prefix, a type, or an id among a list, or all of them',
        description:
          'With its runs, in chunks of short transactions; a task that left the status meanwhile (a retried one) stays, and so does the first task of a recurring series that goes on. Repeating it is harmless.',
        tags: ['bulk'],
        body: BulkDeleteBody,
        response: responses,
      },
    },
    async (request) => lifecycle.bulk(selectorOf(request.body, WITH_ALL), { kind: 'delete', status: request.body.status }),
  );

  app.post(
    '/tasks/bulk/reschedule',
    {
      schema: {
        summary: 'Move every pending task with a tag, a key prefix or a type',
        description:
          'To `runAt` (read in `timezone`, else TIMEZONE; `timezone` also becomes the tasks’ zone), or by `shiftMs` with a `requestId`: a task already moved by that requestId is not moved again, so repeating the request is harmless.',
        tags: ['bulk'],
        body: BulkRescheduleBody,
        response: responses,
      },
    },
    async (request) => {
      const { body } = request;
      const selector = selectorOf(body);
      let move: BulkMove;
      if (body.shiftMs !== undefined) {
        if (body.runAt !== undefined) throw badRequest('body/runAt', 'and body/shiftMs cannot both be given');
        if (body.requestId === undefined) throw badRequest('body/requestId', 'is required with shiftMs (it makes a repeat harmless)');
        move = { shiftMs: body.shiftMs, requestId: body.requestId, allowPast: body.allowPast === true };
      } else {
        if (body.runAt === undefined) throw badRequest('body/runAt', 'or body/shiftMs is required');
        const zone = zoneOf(body.timezone, options.timezone);
        const now = clock.now();
        const runAt = instantOf({ runAt: body.runAt }, zone, now);
        if (runAt < now - PAST_TOLERANCE_MS && body.allowPast !== true) throw pastRunAt('body/runAt', runAt, now);
        move = { runAt, timezone: body.timezone === undefined ? null : zone };
      }
      return lifecycle.bulk(selector, { kind: 'move', move });
    },
  );
};
