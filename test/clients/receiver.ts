/**
 * The conformance suite's webhook receiver: a shop's endpoint that records every call punctual
 * makes to /hook/<name> (method, path, lower-case headers, the raw body as UTF-8 text) and answers
 * 200, and hands the recorded calls to a client's test runner at GET /received/<name>.
 *
 * It verifies nothing on purpose: the signature check under test is each client's own verifier,
 * run by the runner on the recorded call (the case `webhook signature`).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedCall {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export class Receiver {
  readonly #calls = new Map<string, ReceivedCall[]>();
  #server: Server | undefined;
  baseUrl = '';

  async start(): Promise<string> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const path = request.url ?? '/';
        const [, area, name] = /^\/(hook|received)\/([^/?]+)/.exec(path) ?? [];
        response.setHeader('content-type', 'application/json');
        if (area === 'hook' && name !== undefined) {
          const headers: Record<string, string> = {};
          for (const [header, value] of Object.entries(request.headers)) headers[header] = String(value);
          const call = { method: request.method ?? '', path, headers, body: Buffer.concat(chunks).toString('utf8') };
          this.#calls.set(name, [...(this.#calls.get(name) ?? []), call]);
          response.end('{"ok":true}');
        } else if (area === 'received' && request.method === 'GET' && name !== undefined) {
          response.end(JSON.stringify({ requests: this.#calls.get(decodeURIComponent(name)) ?? [] }));
        } else {
          response.statusCode = 404;
          response.end('{"message":"no such receiver path"}');
        }
      });
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.baseUrl = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    if (server === undefined) return;
    this.#server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
