/**
 * An OTLP/HTTP receiver for traces, as a collector would take them (POST /v1/traces, the JSON
 * encoding the OpenTelemetry JS exporter sends): every span it was sent, flattened with its
 * resource's service name, for a test to find by trace, name or parent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string }[];
  /** 0 unset, 1 ok, 2 error. */
  status: number;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

const valueOf = (value: OtlpValue): string | number | boolean =>
  value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.doubleValue ?? value.boolValue ?? '';

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  #server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        if (req.url === '/v1/traces') this.#take(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  #take(body: {
    resourceSpans?: {
      resource?: { attributes?: { key: string; value: OtlpValue }[] };
      scopeSpans?: { spans?: Record<string, unknown>[] }[];
    }[];
  }): void {
    for (const resourceSpans of body.resourceSpans ?? []) {
      const service = String(valueOf(resourceSpans.resource?.attributes?.find((a) => a.key === 'service.name')?.value ?? {}));
      for (const scope of resourceSpans.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          const attributes = Object.fromEntries(
            ((span.attributes as { key: string; value: OtlpValue }[] | undefined) ?? []).map((a) => [a.key, valueOf(a.value)]),
          );
          this.spans.push({
            service,
            traceId: String(span.traceId),
            spanId: String(span.spanId),
            parentSpanId: typeof span.parentSpanId === 'string' && span.parentSpanId !== '' ? span.parentSpanId : undefined,
            name: String(span.name),
            kind: Number(span.kind),
            attributes,
            links: ((span.links as { traceId: string; spanId: string }[] | undefined) ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
            status: Number((span.status as { code?: number } | undefined)?.code ?? 0),
          });
        }
      }
    }
  }

  /** The spans of one trace. */
  inTrace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  async stop(): Promise<void> {
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}
