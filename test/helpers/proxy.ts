/**
 * A TCP proxy between punctual and MariaDB, to break the network the ways real networks break:
 * cut every connection, refuse new ones for a while, or forget idle connections the way a NAT
 * gateway does (the client learns it only when it writes, from a reset).
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

interface Pair {
  client: Socket;
  server: Socket;
  lastActive: number;
  /** Forgotten by the "gateway": the next byte from the client gets a reset. */
  forgotten: boolean;
  /** Swallowed: bytes go nowhere, in either direction, and nothing tells either side. */
  stalled: boolean;
}

export class Proxy {
  readonly #pairs = new Set<Pair>();
  #server: Server | undefined;
  #refusing = false;
  port = 0;
  accepted = 0;
  refused = 0;

  constructor(
    private readonly targetHost = '127.0.0.1',
    private readonly targetPort = 3306,
  ) {}

  async start(): Promise<this> {
    this.#server = createServer((client) => this.#accept(client));
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as { port: number }).port;
    return this;
  }

  /** The URL to give punctual: the same database, through the proxy. */
  url(database: string): string {
    return `mysql://root@127.0.0.1:${this.port}/${database}`;
  }

  get open(): number {
    return this.#pairs.size;
  }

  #accept(client: Socket): void {
    if (this.#refusing) {
      this.refused++;
      client.resetAndDestroy();
      return;
    }
    this.accepted++;
    const server = connect(this.targetPort, this.targetHost);
    const pair: Pair = { client, server, lastActive: Date.now(), forgotten: false, stalled: false };
    this.#pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      if (pair.forgotten) {
        client.resetAndDestroy();
        return;
      }
      if (pair.stalled) return;
      pair.lastActive = Date.now();
      server.write(chunk);
    });
    server.on('data', (chunk: Buffer) => {
      pair.lastActive = Date.now();
      if (!pair.forgotten && !pair.stalled) client.write(chunk);
    });
    const close = () => {
      this.#pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('close', close).on('error', close);
    server.on('close', () => (pair.forgotten ? undefined : close())).on('error', close);
  }

  /** Cuts every connection now (both sides see it at once). */
  cutAll(): void {
    for (const pair of this.#pairs) {
      pair.client.resetAndDestroy();
      pair.server.destroy();
    }
    this.#pairs.clear();
  }

  /** While on, every new connection is reset as it arrives. */
  refuse(on: boolean): void {
    this.#refusing = on;
  }

  /** How many open connections have carried nothing for `idleMs`. */
  idle(idleMs: number): number {
    let idle = 0;
    for (const pair of this.#pairs) if (!pair.forgotten && Date.now() - pair.lastActive >= idleMs) idle++;
    return idle;
  }

  /**
   * Drops the server side of connections idle for `idleMs` without telling the client: its next
   * write meets a reset, as behind a gateway that cleaned its connection table.
   */
  forgetIdle(idleMs: number): number {
    let forgotten = 0;
    for (const pair of this.#pairs) {
      if (Date.now() - pair.lastActive < idleMs || pair.forgotten) continue;
      pair.forgotten = true;
      pair.server.destroy();
      forgotten++;
    }
    return forgotten;
  }

  /** Every open connection stops carrying bytes, silently: a black hole. New ones work. */
  stallAll(): number {
    for (const pair of this.#pairs) pair.stalled = true;
    return this.#pairs.size;
  }

  async stop(): Promise<void> {
    this.cutAll();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}
