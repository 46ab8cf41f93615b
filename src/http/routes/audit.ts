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
import { queryInstant } from '../instants.js';
import { ErrorJson } from '../../contract/errors.js';
import { AuditPage, AuditQuery, type AuditEntryJson } from '../../contract/audit.js';

export interface AuditRoutesOptions {
  store: AuditStore;
  clock: Clock;
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
      const since = queryInstant('since', request.query.since);
      const until = queryInstant('until', request.query.until);
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
