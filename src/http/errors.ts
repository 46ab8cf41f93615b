/**
 * Errors the API answers with, in Fastify's shape ({ statusCode, code, error, message }).
 * 4xx messages name the field at fault; 5xx details stay in the log.
 */
import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance } from 'fastify';
import { isConnectionError, isLockConflict, loggable } from '../db/errors.js';
import { describeErrors } from '../util/schema-errors.js';
import { ReservedTask } from '../lifecycle/lifecycle.js';
import type { TaskJson } from '../contract/tasks.js';

export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    /** Extra fields for the body, e.g. the task a 409 is about. */
    readonly extra: { task?: TaskJson } = {},
  ) {
    super(message);
  }
}

/** 400 naming the field: badRequest('body/runAt', 'must be …') → "body/runAt must be …". */
export function badRequest(field: string, problem: string): HttpError {
  return new HttpError(400, 'PUNCTUAL_BAD_REQUEST', `${field} ${problem}`);
}

/**
 * 400 PUNCTUAL_RUN_AT_PAST: a move to an instant already past, which the request did not say it
 * meant (a typo, an epoch in seconds, a zone mixed up): it would run at once and change nothing else.
 */
export function pastRunAt(field: string, at: number, now: number): HttpError {
  const ago = Math.round((now - at) / 1000).toLocaleString('en-US');
  return new HttpError(
    400,
    'PUNCTUAL_RUN_AT_PAST',
    `${field} ${new Date(at).toISOString()} is ${ago} s in the past; send allowPast: true to run it at once anyway, or delayMs: 0 to run it now`,
  );
}

export function notFound(what: string): HttpError {
  return new HttpError(404, 'PUNCTUAL_NOT_FOUND', `${what} does not exist`);
}

export function conflict(message: string, task: TaskJson): HttpError {
  return new HttpError(409, 'PUNCTUAL_CONFLICT', message, { task });
}

/**
 * The code of a 4xx that Fastify raised (a body its schema refused, a body too large, a media type
 * it cannot read), in punctual's own words: a client sees one set of codes, whichever layer
 * refused its request (FST_ERR_VALIDATION beside PUNCTUAL_BAD_REQUEST before).
 */
export function clientErrorCode(status: number, code: string | undefined): string {
  if (code !== undefined && !code.startsWith('FST_')) return code;
  if (status === 400) return 'PUNCTUAL_BAD_REQUEST';
  const name = (STATUS_CODES[status] ?? 'client error').toUpperCase().replace(/[^A-Z]+/g, '_');
  return `PUNCTUAL_${name}`;
}

export function installErrorHandler(app: FastifyInstance): void {
  app.setSchemaErrorFormatter((errors, dataVar) => new Error(describeErrors(errors, dataVar)));

  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    if (error instanceof HttpError) {
      return reply.status(error.statusCode).send({
        statusCode: error.statusCode,
        code: error.code,
        error: STATUS_CODES[error.statusCode] ?? 'Error',
        message: error.message,
        ...error.extra,
      });
    }
    if (error instanceof ReservedTask) {
      return reply.status(403).send({ statusCode: 403, code: 'PUNCTUAL_RESERVED_TASK', error: STATUS_CODES[403], message: error.message });
    }
    const status = error.statusCode ?? 500;
    if (status < 500) {
      // A body over the limit says the limit (Fastify's own words name none).
      const limit = request.routeOptions.bodyLimit;
      const message = status === 413 && limit !== undefined ? `the request body is larger than the limit of ${limit} bytes (${Math.round(limit / 1024)} KiB)` : error.message;
      return reply.status(status).send({
        statusCode: status,
        code: clientErrorCode(status, error.code),
        error: STATUS_CODES[status] ?? 'Error',
        message,
      });
    }
    if (isConnectionError(error)) {
      request.log.warn({ err: loggable(error) }, 'request failed: database unavailable');
      return reply.status(503).send({
        statusCode: 503,
        code: 'PUNCTUAL_DATABASE_UNAVAILABLE',
        error: STATUS_CODES[503],
        message: 'the database is unavailable; try again (a repeated create with the same key is safe)',
      });
    }
    if (isLockConflict(error)) {
      // Lost to another transaction through every try (on Galera, a write conflict between two
      // nodes): its transaction was rolled back, and the same request shortly after most likely passes.
      request.log.warn({ err: loggable(error) }, 'request failed: lost to a concurrent write');
      return reply.status(503).header('retry-after', '1').send({
        statusCode: 503,
        code: 'PUNCTUAL_WRITE_CONFLICT',
        error: STATUS_CODES[503],
        message:
          'a concurrent write took the rows this request needed and its transaction was rolled back; try again (a repeated create with the same key is safe)',
      });
    }
    request.log.error({ err: loggable(error) }, 'request failed');
    return reply.status(500).send({
      statusCode: 500,
      code: 'PUNCTUAL_INTERNAL',
      error: STATUS_CODES[500],
      message: 'internal error; see the service log',
    });
  });
}
