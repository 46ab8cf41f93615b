/**
 * A create request's body read into what the lifecycle creates, or a 400 naming the field: the
 * one reading of a create, shared by POST /tasks and each item of POST /tasks/batch, so an item
 * of a batch gets exactly the answer it would get alone.
 */
import { Compile } from 'typebox/compile';
import type { HandlerRegistry } from '../handlers/registry.js';
import type { CreateRequest } from '../lifecycle/create.js';
import { isReservedKey, RESERVED_KEY_PREFIX } from '../store/task-types.js';
import { checkCron, CronError, nextOccurrence } from '../time/recurrence.js';
import { tagsProblem } from '../store/tags.js';
import { spreadOffset } from '../time/spread.js';
import { canonicalZone, parseRunAt, TimeInputError, zoneOfOffset } from '../time/zones.js';
import { describeErrors, jsonProblem } from '../util/schema-errors.js';
import { badRequest, HttpError } from './errors.js';
import { storedInstant } from './instants.js';
import { CreateTaskBody } from '../contract/tasks.js';

/** Payloads are kept small: a task names its work, it does not carry it. */
export const MAX_PAYLOAD_BYTES = 64 * 1024;
/**
 * Deeper JSON is refused before anything walks it or the database sees it: MariaDB's JSON
 * refuses 32 nested arrays or objects (the payload column's CHECK fails), so 31 is the most.
 */
export const MAX_PAYLOAD_DEPTH = 31;

export interface CreateInput {
  registry: HandlerRegistry;
  /** TIMEZONE: the zone of a naive runAt when the request names none. */
  timezone: string;
  /** MAX_ATTEMPTS: the default for a task that does not say. */
  maxAttempts: number;
}

export function zoneOf(requested: string | undefined, fallback: string): string {
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
export function instantOf(body: { runAt?: string | number; delayMs?: number; cron?: string }, zone: string, now: number): number {
  if (body.runAt !== undefined && body.delayMs !== undefined) throw badRequest('body/runAt', 'and body/delayMs cannot both be given');
  if (body.delayMs !== undefined) return storedInstant('body/delayMs', now + body.delayMs);
  if (body.runAt === undefined) {
    if (body.cron === undefined) throw badRequest('body/runAt', 'or body/delayMs is required');
    const first = nextOccurrence(body.cron, zone, now);
    if (first === null) throw badRequest('body/cron', 'never matches a time to come');
    return first;
  }
  try {
    return storedInstant('body/runAt', parseRunAt(body.runAt, zone, now));
  } catch (error) {
    if (error instanceof TimeInputError) throw badRequest('body/runAt', error.message);
    throw error;
  }
}

/** A cron expression the service can follow (a match within ten years), or a 400 naming the field. */
function checkedCron(cron: string | undefined, zone: string, now: number): string | null {
  if (cron === undefined) return null;
  try {
    checkCron(cron, zone, now);
    return cron.trim();
  } catch (error) {
    if (error instanceof CronError) throw badRequest('body/cron', error.message);
    throw error;
  }
}

/** A payload as a create checks it (depth, the type's schema, size), for a task of `type`; `field` names it in a 400. */
export function checkedPayload(registry: HandlerRegistry, type: string, payload: unknown, field: string): unknown {
  const unfit = jsonProblem(payload, MAX_PAYLOAD_DEPTH);
  if (unfit !== undefined) throw badRequest(field, unfit);
  const problem = registry.payloadProblem(type, payload, field);
  if (problem !== undefined) throw new HttpError(400, 'PUNCTUAL_BAD_REQUEST', problem);
  if (Buffer.byteLength(JSON.stringify(payload)) > MAX_PAYLOAD_BYTES) {
    throw badRequest(field, `must not be larger than ${MAX_PAYLOAD_BYTES} bytes as JSON`);
  }
  return payload;
}

/** A body the schema already accepted, read into a create; throws a 400 HttpError. */
export function createFromBody(body: CreateTaskBody, input: CreateInput, now: number): CreateRequest {
  const { registry } = input;
  if (registry.get(body.type) === undefined) {
    throw badRequest('body/type', `is not a known task type: ${JSON.stringify(body.type)} (known: ${registry.types.join(', ')})`);
  }
  const payload = body.payload ?? {};
  const unfit = jsonProblem(payload, MAX_PAYLOAD_DEPTH);
  if (unfit !== undefined) throw badRequest('body/payload', unfit);
  if (body.key !== undefined && !body.key.isWellFormed()) {
    throw badRequest('body/key', 'must not contain a lone surrogate (it is not valid Unicode)');
  }
  // A failure notice is written under its key with ON DUPLICATE KEY UPDATE: a task that took the
  // key first (ids are sequential, so a notice's key is easy to foresee) would silence the notice.
  if (body.key !== undefined && isReservedKey(body.key)) {
    throw badRequest('body/key', `must not start with ${JSON.stringify(RESERVED_KEY_PREFIX)}: those keys are punctual's failure notices`);
  }
  const tags = body.tags ?? [];
  const badTags = tagsProblem(tags, 'body/tags');
  if (badTags !== undefined) throw new HttpError(400, 'PUNCTUAL_BAD_REQUEST', badTags);
  if (body.maxDelayMs !== undefined && body.onKeyConflict !== 'replace') {
    throw badRequest('body/maxDelayMs', 'needs body/onKeyConflict "replace"');
  }
  if (body.onKeyConflict === 'replace' && body.key === undefined) throw badRequest('body/onKeyConflict', '"replace" needs body/key');
  if (body.onKeyConflict === 'replace' && body.cron !== undefined) {
    throw badRequest('body/onKeyConflict', '"replace" is for one-shot tasks, not with body/cron');
  }
  const zone = zoneOf(body.timezone, input.timezone);
  const cron = checkedCron(body.cron, zone, now);
  if (body.spreadMs !== undefined && body.cron !== undefined)
    throw badRequest('body/spreadMs', 'is for one-shot tasks, not with body/cron');
  const offsetMs = body.spreadMs === undefined ? 0 : spreadOffset(body.key ?? null, body.spreadMs);
  const instant = instantOf(body, zone, now);
  const runAt = instant + offsetMs;
  const problem = registry.payloadProblem(body.type, payload, 'body/payload');
  if (problem !== undefined) throw new HttpError(400, 'PUNCTUAL_BAD_REQUEST', problem);
  const payloadJson = JSON.stringify(payload);
  if (Buffer.byteLength(payloadJson) > MAX_PAYLOAD_BYTES) {
    throw badRequest('body/payload', `must not be larger than ${MAX_PAYLOAD_BYTES} bytes as JSON`);
  }
  const request: CreateRequest = {
    task: {
      key: body.key ?? null,
      type: body.type,
      payload,
      payloadJson,
      runAt,
      timezone:
        body.timezone === undefined && body.cron === undefined && typeof body.runAt === 'string'
          ? zoneOfOffset(body.runAt, instant, zone)
          : zone,
      maxAttempts: body.maxAttempts ?? input.maxAttempts,
      misfire: body.misfire ?? 'run',
      cron,
      tags,
      priority: body.priority ?? 0,
      latestRunAt: body.maxDelayMs === undefined ? null : runAt + body.maxDelayMs,
      expireAfterMs: body.expireAfterMs ?? null,
      group: body.group ?? null,
    },
    delayMs: body.delayMs,
  };
  // The optional fields are set only when given, not spread in: spreading would build three more
  // objects for each item of a batch.
  if (offsetMs !== 0) request.offsetMs = offsetMs;
  if (body.onKeyConflict === 'replace') request.onKeyConflict = 'replace';
  if (body.maxDelayMs !== undefined) request.maxDelayMs = body.maxDelayMs;
  return request;
}

/** The message of a 409: the key is taken by another request's task. */
export function conflictMessage(existing: { key: string | null; id: number }): string {
  return `key ${JSON.stringify(existing.key)} already names task ${existing.id} with a different type, payload, runAt, cron or tags`;
}

/** Compiled at the first batch, not at every start. */
let compiled: ReturnType<typeof compileCreateBody> | undefined;
const compileCreateBody = () => Compile(CreateTaskBody);

/**
 * An item of a batch, not yet checked against the schema (the batch schema takes any item, so
 * one bad item cannot refuse the others): the same check and the same message as POST /tasks.
 */
export function createFromBatchItem(item: unknown, input: CreateInput, now: number): CreateRequest {
  const createBody = (compiled ??= compileCreateBody());
  if (!createBody.Check(item)) throw new HttpError(400, 'PUNCTUAL_BAD_REQUEST', describeErrors(createBody.Errors(item), 'body'));
  return createFromBody(item, input, now);
}
