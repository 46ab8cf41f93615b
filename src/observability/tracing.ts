/**
 * Traces from a shop's request to a task's effect (OpenTelemetry, W3C Trace Context).
 *
 * - In: a create's `traceparent`/`tracestate` headers, validated and bounded (traceContextOf); a
 *   malformed one is ignored, never an error. The task keeps the context (two columns), across
 *   reschedules, retries and restarts.
 * - Spans, only when an exporter is configured by the standard variables
 *   (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_TRACES_EXPORTER`,
 *   `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`): a server span per create, whose
 *   context is what the task keeps; per run a span whose parent is the kept context, or a link to
 *   it for a recurring task's later occurrences (its parent would be the create of the series'
 *   first task, long done: a link says "caused by" without claiming to be inside it); a client
 *   or producer span per call the run makes.
 * - Out: a webhook, a broker message and a pull lease carry the run's (or its call's) context. With
 *   no exporter, a task created with a context still passes its trace on under a span id of its
 *   own, never the caller's: the run is a span that is not recorded.
 * - With no exporter and no context on the task, the run costs nothing here (runSpan answers
 *   undefined before it allocates anything).
 * See docs/operations.md#traces.
 */
import { randomBytes } from 'node:crypto';
import {
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { parseTraceParent, TraceState } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';

/** The W3C trace context a task carries from its create to its runs. */
export interface TraceContext {
  /** `00-<trace id>-<parent span id>-<flags>`. */
  traceParent: string;
  traceState: string | null;
}

/** A tracestate longer than this is dropped (the W3C asks to keep at least 512 characters). */
export const MAX_TRACE_STATE = 512;

/** The header as W3C Trace Context writes it, version 00. */
function traceParentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A request's trace context, validated and bounded; undefined when absent or malformed (ignored, never an error). */
export function traceContextOf(traceparent: unknown, tracestate: unknown): TraceContext | undefined {
  if (typeof traceparent !== 'string' || traceparent.length > 128) return undefined;
  const parsed = parseTraceParent(traceparent.trim());
  if (parsed === null) return undefined;
  let state: string | null = null;
  if (typeof tracestate === 'string' && tracestate.length <= 4 * MAX_TRACE_STATE) {
    const serialized = new TraceState(tracestate).serialize();
    if (serialized !== '' && serialized.length <= MAX_TRACE_STATE) state = serialized;
  }
  return { traceParent: traceParentOf(parsed), traceState: state };
}

/** The span context a kept trace context names (a remote parent). */
function remoteOf(kept: TraceContext): SpanContext | undefined {
  const parsed = parseTraceParent(kept.traceParent);
  if (parsed === null) return undefined;
  return { ...parsed, isRemote: true, traceState: kept.traceState === null ? undefined : new TraceState(kept.traceState) };
}

/** The outgoing headers of a span: `traceparent`, and `tracestate` when there is one. */
function headersOf(context: SpanContext): Record<string, string> {
  const state = context.traceState?.serialize();
  return state === undefined || state === '' ? { traceparent: traceParentOf(context) } : { traceparent: traceParentOf(context), tracestate: state };
}

/** A call a run makes (a webhook, a broker publish): the headers it sends, and its end. */
export interface OutgoingCall {
  readonly headers: Record<string, string>;
  end(result: { httpStatus?: number; error?: string }): void;
}

/** What a run's handler is given to carry the trace on (HandlerContext.trace). */
export interface RunTrace {
  /** The context a pull worker continues (the run's own). */
  readonly headers: Record<string, string>;
  /** A call to make: its own span when spans are recorded, this run's headers otherwise. */
  outgoing(name: string, kind: 'client' | 'producer', attributes: Attributes): OutgoingCall;
}

/** What a task's run is, for its span. */
export interface RunOf {
  id: number;
  key: string | null;
  type: string;
  /** The attempt this run is (1 on the first). */
  attempt: number;
  /** A recurring task's occurrence after the first: linked to the kept context, not its child. */
  occurrence: boolean;
  trace: TraceContext | null;
}

/** A run's span: recorded, or (no exporter) a span context of its own in the kept trace. */
export class RunSpan implements RunTrace {
  readonly headers: Record<string, string>;

  constructor(
    private readonly span: Span,
    private readonly tracer: Tracer | undefined,
  ) {
    this.headers = headersOf(span.spanContext());
  }

  outgoing(name: string, kind: 'client' | 'producer', attributes: Attributes): OutgoingCall {
    if (this.tracer === undefined) return { headers: this.headers, end: () => undefined };
    const parent = trace.setSpan(ROOT_CONTEXT, this.span);
    const span = this.tracer.startSpan(name, { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.PRODUCER, attributes }, parent);
    return {
      headers: headersOf(span.spanContext()),
      end({ httpStatus, error }) {
        if (httpStatus !== undefined) span.setAttribute('http.response.status_code', httpStatus);
        if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
        span.end();
      },
    };
  }

  /** A part of the run already over (a database handler's work in its transaction): a child span from `startTime` to `endTime`. */
  part(name: string, attributes: Attributes, startTime: number, endTime: number): void {
    if (this.tracer === undefined) return;
    const parent = trace.setSpan(ROOT_CONTEXT, this.span);
    this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes, startTime }, parent).end(endTime);
  }

  /** `outcome`: done, retry, failed, expired, lease lost…; `error` when it failed. */
  end(outcome: string, error?: string, endTime?: number): void {
    this.span.setAttribute('punctual.outcome', outcome);
    if (error !== undefined) this.span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    this.span.end(endTime);
  }
}

/** A create request's server span, and the context its task keeps. */
export interface CreateSpan {
  /** What the created task keeps: the span's context when recorded, else the caller's. */
  readonly kept: TraceContext | undefined;
  end(status: number, taskIds?: readonly number[]): void;
}

const randomSpanId = () => randomBytes(8).toString('hex');

export class Tracing {
  readonly #provider: BasicTracerProvider | undefined;
  readonly #tracer: Tracer | undefined;
  /** This process (lease_owner's name), on every run span. */
  readonly #process: string;

  private constructor(provider: BasicTracerProvider | undefined, process: string) {
    this.#provider = provider;
    this.#tracer = provider?.getTracer('punctual');
    this.#process = process;
  }

  /** Spans are recorded and exported (an OTLP endpoint is configured). */
  get recording(): boolean {
    return this.#tracer !== undefined;
  }

  /** None recorded: contexts are still carried. */
  static off(process = ''): Tracing {
    return new Tracing(undefined, process);
  }

  /**
   * From the standard variables: spans are exported over OTLP/HTTP when an endpoint is named
   * (or OTEL_TRACES_EXPORTER=otlp), unless OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true.
   */
  static fromEnv(env: NodeJS.ProcessEnv, options: { process: string; version: string; log: Logger }): Tracing {
    const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
    const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
    const wanted = exporter === 'otlp' || ((exporter === undefined || exporter === '') && endpoint !== undefined && endpoint !== '');
    if (!wanted || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return Tracing.off(options.process);
    // The SDK's own complaints (an export that fails) go to the log, once each, as warnings.
    diag.setLogger(
      {
        error: (message: string) => options.log.warn({ component: 'opentelemetry' }, message),
        warn: (message: string) => options.log.warn({ component: 'opentelemetry' }, message),
        info: () => undefined,
        debug: () => undefined,
        verbose: () => undefined,
      },
      DiagLogLevel.WARN,
    );
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        'service.name': env.OTEL_SERVICE_NAME ?? 'punctual',
        'service.version': options.version,
        'service.instance.id': options.process,
      }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
    });
    return new Tracing(provider, options.process);
  }

  /** A create's server span (POST /tasks, /tasks/batch) under the caller's context; undefined when there is nothing to record or keep. */
  startCreate(route: string, incoming: TraceContext | undefined): CreateSpan | undefined {
    const tracer = this.#tracer;
    if (tracer === undefined) return incoming === undefined ? undefined : { kept: incoming, end: () => undefined };
    const remote = incoming === undefined ? undefined : remoteOf(incoming);
    const parent = remote === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, remote);
    const span = tracer.startSpan(
      `POST ${route}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'POST', 'http.route': route, 'url.path': route } },
      parent,
    );
    const context = span.spanContext();
    return {
      kept: { traceParent: traceParentOf(context), traceState: context.traceState?.serialize() || null },
      end(status, taskIds) {
        span.setAttribute('http.response.status_code', status);
        if (taskIds !== undefined && taskIds.length === 1) span.setAttribute('punctual.task.id', taskIds[0]!);
        if (taskIds !== undefined) span.setAttribute('punctual.tasks.created', taskIds.length);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      },
    };
  }

  /**
   * The span of `run`, started at `startTime` (epoch ms) and `latenessMs` late; undefined when
   * nothing is recorded and the task keeps no context: nothing is allocated for it then.
   */
  runSpan(run: RunOf, startTime: number, latenessMs: number): RunSpan | undefined {
    const tracer = this.#tracer;
    if (tracer === undefined && run.trace === null) return undefined;
    const remote = run.trace === null ? undefined : remoteOf(run.trace);
    if (tracer === undefined) {
      if (remote === undefined) return undefined;
      // Not recorded: a span context of its own in the kept trace, so a receiver never sees the caller's span id.
      return new RunSpan(trace.wrapSpanContext({ ...remote, spanId: randomSpanId(), isRemote: false }), undefined);
    }
    const attributes: Attributes = {
      'messaging.system': 'punctual',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': run.type,
      'messaging.message.id': String(run.id),
      'punctual.task.id': run.id,
      'punctual.task.type': run.type,
      'punctual.attempt': run.attempt,
      'punctual.lateness_ms': latenessMs,
      'punctual.process': this.#process,
    };
    if (run.key !== null) attributes['punctual.task.key'] = run.key;
    const linked = run.occurrence && remote !== undefined;
    const parent = remote === undefined || linked ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, remote);
    const span = tracer.startSpan(
      `process ${run.type}`,
      { kind: SpanKind.CONSUMER, startTime, attributes, links: linked ? [{ context: remote }] : [] },
      parent,
    );
    return new RunSpan(span, tracer);
  }

  /** Sends what is buffered and stops (at the service's stop). */
  async shutdown(): Promise<void> {
    await this.#provider?.shutdown().catch(() => undefined);
  }
}
