/**
 * A create's trace (POST /tasks, /tasks/batch): the caller's W3C context read from the request's
 * headers (a malformed one ignored), a server span when spans are recorded, and the context each
 * task created keeps (observability/tracing.ts). Nothing is made for a request without a context
 * while spans are not recorded.
 */
import type { FastifyRequest } from 'fastify';
import { traceContextOf, type CreateSpan, type Tracing } from '../observability/tracing.js';
import type { CreateRequest } from '../lifecycle/create.js';
import { HttpError } from './errors.js';

export function startCreateTrace(tracing: Tracing | undefined, route: string, request: FastifyRequest): CreateSpan | undefined {
  if (tracing === undefined) return undefined;
  const { traceparent, tracestate } = request.headers;
  return tracing.startCreate(route, traceparent === undefined ? undefined : traceContextOf(traceparent, tracestate));
}

/** `create` keeps the span's context (a no-op without one). */
export function keepTrace(span: CreateSpan | undefined, create: CreateRequest): CreateRequest {
  if (span?.kept !== undefined) {
    create.task.traceParent = span.kept.traceParent;
    create.task.traceState = span.kept.traceState;
  }
  return create;
}

/** Ends the span of a create that threw, with the status its answer has. */
export function endOnError(span: CreateSpan | undefined, error: unknown): void {
  span?.end(error instanceof HttpError ? error.statusCode : 500);
}
