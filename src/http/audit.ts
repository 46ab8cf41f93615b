/**
 * The audit trail's recorder: every change made through the API (the routes of AUDITED) is
 * written to punctual_audit_log with the name of the token that made it, the request's id, what it was
 * done to and what came of it, before the answer is sent: a client that got its answer knows the
 * change is on record. Changes made count (2xx), and so do changes refused because the task was
 * not in the state they need (409); a request refused for its input or its token changed nothing
 * and is not recorded. Creates are not recorded here: they are the hot path, and a task carries
 * its own createdAt; but a create that replaced an existing task (onKeyConflict: replace) changed
 * that task, and is recorded as a `replace` of it.
 *
 * The change itself is committed by then, so a failed audit write does not undo it: it is logged
 * as an error and the answer goes out.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuditStore } from '../store/audit.js';
import type { Clock } from '../time/clock.js';
import type { AUDIT_ACTIONS } from '../contract/audit.js';

type Action = (typeof AUDIT_ACTIONS)[number];

interface Audited {
  action: Action;
  /** When the same route does two things an operator tells apart (a reschedule to now is a run now). */
  actionOf?: (request: FastifyRequest) => Action;
  target: (request: FastifyRequest) => string;
}

type Params = Record<string, string | number | undefined>;
type Body = Record<string, unknown> | undefined;

const param = (name: string) => (request: FastifyRequest) => String((request.params as Params)[name]);

/** The longest target the trail keeps (its column). */
const MAX_TARGET = 255;

/** A selection of ids as a target: `ids:12,13,14`, cut to fit with the count of the rest (`…+40`). */
function idsTarget(ids: unknown[]): string {
  const full = `ids:${ids.join(',')}`;
  if (full.length <= MAX_TARGET) return full;
  let text = 'ids:';
  for (const [i, id] of ids.entries()) {
    const next = `${i === 0 ? '' : ','}${String(id)}`;
    // Room for this id and for the count of those after it.
    if (text.length + next.length + `…+${ids.length - i - 1}`.length > MAX_TARGET) return `${text}…+${ids.length - i}`;
    text += next;
  }
  return text;
}

/** A bulk change's selector, as its target. */
function selectorOf(request: FastifyRequest): string {
  const body = request.body as Body;
  if (Array.isArray(body?.ids)) return idsTarget(body.ids);
  if (typeof body?.tag === 'string') return `tag:${body.tag}`;
  if (typeof body?.keyPrefix === 'string') return `key-prefix:${body.keyPrefix}`;
  return `type:${String(body?.type)}`;
}

/** `METHOD route pattern` → what it does and to what. Every change route but the creates is here (a test checks it). */
export const AUDITED: Readonly<Record<string, Audited>> = {
  'POST /tasks/:id/cancel': { action: 'cancel', target: (r) => `task:${param('id')(r)}` },
  'POST /tasks/by-key/:key/cancel': { action: 'cancel', target: (r) => `key:${param('key')(r)}` },
  'POST /tasks/:id/reschedule': {
    action: 'reschedule',
    actionOf: (r) => ((r.body as Body)?.delayMs === 0 ? 'run-now' : 'reschedule'),
    target: (r) => `task:${param('id')(r)}`,
  },
  'POST /tasks/:id/retry': { action: 'retry', target: (r) => `task:${param('id')(r)}` },
  'PUT /tasks/:id/payload': { action: 'edit-payload', target: (r) => `task:${param('id')(r)}` },
  'DELETE /tasks/:id': { action: 'delete', target: (r) => `task:${param('id')(r)}` },
  'POST /tasks/bulk/cancel': { action: 'bulk-cancel', target: selectorOf },
  'POST /tasks/bulk/delete': { action: 'bulk-delete', target: selectorOf },
  'POST /tasks/bulk/reschedule': { action: 'bulk-reschedule', target: selectorOf },
  'POST /tasks/bulk/retry': { action: 'bulk-retry', target: selectorOf },
  'POST /types/:type/pause': { action: 'pause', target: (r) => `type:${param('type')(r)}` },
  'POST /types/:type/resume': { action: 'resume', target: (r) => `type:${param('type')(r)}` },
  'PUT /types/:type/limits': { action: 'limits', target: (r) => `type:${param('type')(r)}` },
  'POST /tasks/:id/release-lease': { action: 'release-lease', target: (r) => `task:${param('id')(r)}` },
};

/**
 * The routes that change nothing a trail needs: the creates, the pull workers' lease and settles
 * (a worker's hot path; the task's row keeps each outcome), and the test clock's moves (a test's,
 * on a database of its own, never production's).
 */
export const NOT_AUDITED = new Set([
  'POST /tasks',
  'POST /tasks/batch',
  'POST /workers/lease',
  'POST /tasks/:id/ack',
  'POST /workers/ack',
  'POST /tasks/:id/nack',
  'POST /tasks/:id/extend',
  'POST /test/clock',
]);

/** What came of a change, from its answer: the task's state after, or a bulk change's counts. */
function resultOf(payload: unknown): unknown {
  if (typeof payload !== 'string' || payload === '') return null;
  try {
    const body = JSON.parse(payload) as Record<string, unknown>;
    if ('matched' in body || 'changed' in body) return { matched: body.matched, changed: body.changed };
    const task = (typeof body.task === 'object' && body.task !== null ? body.task : body) as Record<string, unknown>;
    if ('status' in task && 'id' in task) return { taskId: task.id, status: task.status, runAt: task.runAt };
    return { message: body.message };
  } catch {
    return null;
  }
}

/**
 * A create that replaced tasks, as the change it is: the task (or, for a batch, the ids) it
 * replaced. The detail keeps the request of a single create (its new payload and time); of a
 * batch, only which tasks (the whole batch may be 1,000 payloads).
 */
function replaceOf(request: FastifyRequest): Audited | undefined {
  const ids = request.replaced;
  if (ids === undefined || ids.length === 0) return undefined;
  return { action: 'replace', target: () => (ids.length === 1 ? `task:${ids[0]}` : idsTarget(ids)) };
}

/** A request id a client may choose (X-Request-Id): short and plain, so it cannot forge a log line. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

export function requestIdOf(request: FastifyRequest): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : request.id;
}

export function installAudit(app: FastifyInstance, store: AuditStore, clock: Clock): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const audited = AUDITED[`${request.method} ${request.routeOptions.url ?? ''}`] ?? replaceOf(request);
    if (audited === undefined || request.tokenName === undefined) return payload;
    const status = reply.statusCode;
    if (!(status < 300 || status === 409)) return payload;
    try {
      await store.record({
        at: clock.now(),
        actor: request.tokenName,
        role: request.role ?? 'read',
        requestId: requestIdOf(request),
        action: audited.actionOf?.(request) ?? audited.action,
        target: audited.target(request),
        status,
        detail:
          request.replaced !== undefined && request.routeOptions.url === '/tasks/batch'
            ? { request: { replaced: request.replaced }, result: { replaced: request.replaced.length } }
            : { request: request.body ?? null, result: resultOf(payload) },
      });
    } catch (error) {
      request.log.error({ err: error, action: audited.action }, 'audit: could not record a change; it was made');
    }
    return payload;
  });
}
