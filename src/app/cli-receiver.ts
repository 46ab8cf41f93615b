/**
 * `punctual receiver`: a webhook receiver to try punctual with, standing in for a shop's endpoint
 * (the README's first task). It listens (127.0.0.1:4000 by default), prints one line per call it
 * gets — when, method and path, task and attempt, the Idempotency-Key, whether the signature is
 * good, the body — and answers 200 (or `--status`, to watch punctual retry). With `WEBHOOK_SECRET`
 * (or `WEBHOOK_SECRET_FILE`, `WEBHOOK_SECRET_NEXT`) set as for the service, it checks each call's
 * signature the way docs/handlers.md#receiving-a-webhook tells a receiver to; without, it says it
 * did not. It is for trying and watching, not for production: there a shop's own endpoint checks
 * the signature and drops repeats.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { printable } from '../util/printable.js';
import { CliError } from './cli-api.js';
import { loadConfig } from './config.js';

/** How far a call's `t` may be from now, as in the documented receivers. */
const TOLERANCE_MS = 5 * 60_000;
/** The most of a body printed. */
const BODY_CHARS = 500;

/** Whether the call carries a `v2` signature by one of `secrets` over its canonical string, made within the tolerance. */
export function signatureOk(method: string, url: string, headers: IncomingMessage['headers'], body: Buffer, secrets: string[]): boolean {
  const [stamp = '', ...given] = String(headers['x-punctual-signature'] ?? '').split(',');
  const t = /^t=(\d+)$/.exec(stamp)?.[1];
  if (t === undefined || Math.abs(Date.now() - Number(t)) > TOLERANCE_MS) return false;
  const canonical = [
    t,
    method.toUpperCase(),
    url,
    String(headers['idempotency-key'] ?? ''),
    createHash('sha256').update(body).digest('hex'),
  ].join('\n');
  return secrets.some((secret) => {
    const expected = Buffer.from(`v2=${createHmac('sha256', secret).update(canonical).digest('hex')}`);
    return given.some((signature) => signature.length === expected.length && timingSafeEqual(Buffer.from(signature), expected));
  });
}

export interface ReceiverOptions {
  host: string;
  port: number;
  status: number;
}

/** Runs the receiver until SIGINT or SIGTERM, writing a line per call with `out`. */
export async function receive(options: ReceiverOptions, out: (line: string) => void): Promise<void> {
  const { webhook } = loadConfig(process.env);
  const secrets = [webhook.secret, webhook.nextSecret].filter((secret): secret is string => secret !== undefined);
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      // The URL punctual was given: this host (as called) and the path.
      const url = new URL(request.url ?? '/', `http://${request.headers.host ?? `${options.host}:${options.port}`}`).href;
      const signature =
        secrets.length === 0
          ? 'signature not checked (no WEBHOOK_SECRET here)'
          : signatureOk(request.method ?? 'GET', url, request.headers, body, secrets)
            ? 'signature ok'
            : 'signature BAD';
      const text = body.toString('utf8');
      const fields = [
        new Date().toISOString(),
        `${request.method ?? '?'} ${request.url ?? '/'}`,
        `task ${String(request.headers['x-punctual-task-id'] ?? '-')}`,
        `attempt ${String(request.headers['x-punctual-attempt'] ?? '-')}`,
        `Idempotency-Key ${String(request.headers['idempotency-key'] ?? '-')}`,
        signature,
        text.length > BODY_CHARS ? `${text.slice(0, BODY_CHARS)}…` : text,
      ];
      out(printable(fields.join('  ')));
      response.writeHead(options.status, { 'content-type': 'text/plain' }).end(options.status < 300 ? 'ok\n' : 'failing on purpose\n');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new CliError(`cannot listen on ${options.host}:${options.port}: ${error.code ?? error.message}`)),
    );
    server.listen(options.port, options.host, resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  const where = `http://${address.includes(':') ? `[${address}]` : address}:${port}/`;
  out(
    `receiving webhooks on ${where}, answering ${options.status}; ${
      secrets.length === 0 ? 'WEBHOOK_SECRET is not set here: signatures are not checked' : 'signatures checked with WEBHOOK_SECRET'
    }. Ctrl-C stops it.`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop).off('SIGTERM', stop);
      server.close(() => resolve());
      server.closeAllConnections();
    };
    process.once('SIGINT', stop).once('SIGTERM', stop);
  });
}
