/**
 * GET /audit (admin): the audit trail, newest first, paged by entry id, filtered by actor (the
 * token's name), action, target and time. The entries are written by the recorder in ../audit.ts,
 * which buildApp installs on the whole app.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AuditStore } from '../../store/audit.js';
import type { Clock } from '../../time/clock.js';
import { toIsoUtc } from '../../time/zones.js';
import { badRequest } from '../errors.js';
import { ErrorJson } from '../../contract/errors.js';
import { AuditPage, AuditQuery, type AuditEntryJson } from '../../contract/audit.js';

export interface AuditRoutesOptions {
  store: AuditStore;
  clock: Clock;
}

/** An instant with its offset (or Z): a naive time would be read in some zone nobody named. */
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

function instant(field: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const at = ISO_WITH_OFFSET.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(at))
    throw badRequest(`querystring/${field}`, 'must be an ISO-8601 instant with an offset, e.g. 2026-12-01T10:00:00+08:00');
  return at;
}

export const auditRoutes: FastifyPluginAsync<AuditRoutesOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/audit',
    {
      schema: {
        summary: 'The audit trail: every change made through the API, newest first',
        tags: ['operations'],
        querystring: AuditQuery,
        response: { 200: AuditPage, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson },
      },
    },
    async (request) => {
      const { actor, action, target, limit = 100, cursor } = request.query;
      const since = instant('since', request.query.since);
      const until = instant('until', request.query.until);
      const entries = await options.store.page({
        actor,
        action,
        target,
        since,
        until,
        before: cursor === undefined ? undefined : Number(cursor),
        limit: limit + 1,
      });
      const page = entries.slice(0, limit);
      return {
        entries: page.map((entry): AuditEntryJson => ({
          ...entry,
          at: toIsoUtc(entry.at),
          action: entry.action as AuditEntryJson['action'],
        })),
        nextCursor: entries.length > limit ? String(page[page.length - 1]!.id) : null,
      };
    },
  );
};
