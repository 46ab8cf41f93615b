/**
 * A TCP proxy between punctual and MariaDB, to break the network the ways real networks break:
 * cut every connection, refuse new ones for a while, or forget idle connections the way a NAT
 * gateway does (the client learns it only when it writes, from a reset). With `delayMs` it delays
 * every chunk by that time each way, in order: a database across a network (1 ms each way is
 * about a cloud zone's round trip; B9 of the bench). With `onQuery` it reads the queries a client
 * sends (the MySQL protocol's COM_QUERY packets, without TLS or compression) and can act once the
 * server has answered one: kill the client right after a statement ran (the migration tests).
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
  /** Client bytes not yet cut into whole protocol packets (onQuery only). */
  pending: Buffer;
  /** Called with the server's answer to the last query, before it is passed on (onQuery's result). */
  onAnswer: AnswerWatcher | undefined;
}

/**
 * Called with the first bytes of the server's answer to a query, before they reach the client:
 * 'drop' keeps them from it, and `deliver` passes them on later (an answer held back).
 */
export type AnswerWatcher = (answer: Buffer, deliver: () => void) => 'pass' | 'drop';

/** Told each query a client sends, in order; what it returns watches the server's answer. */
export type QueryWatcher = (query: string) => AnswerWatcher | undefined;

/** COM_QUERY: a text statement. */
const COM_QUERY = 0x03;

export class Proxy {
  readonly #pairs = new Set<Pair>();
  #server: Server | undefined;
  #refusing = false;
  port = 0;
  accepted = 0;
  refused = 0;
  /** Chunks sent from the client side to the database: about one per round trip. */
  requests = 0;
  readonly delayMs: number;
  readonly #targetHost: string;
  readonly #targetPort: number;
  readonly #onQuery: QueryWatcher | undefined;

  constructor(options: { delayMs?: number; targetHost?: string; targetPort?: number; onQuery?: QueryWatcher } = {}) {
    this.delayMs = options.delayMs ?? 0;
    this.#targetHost = options.targetHost ?? '127.0.0.1';
    this.#targetPort = options.targetPort ?? 3306;
    this.#onQuery = options.onQuery;
  }

  /** Cuts the client's bytes into packets (3-byte length, sequence, payload) and tells onQuery of each COM_QUERY. */
  #readQueries(pair: Pair, chunk: Buffer): void {
    pair.pending = Buffer.concat([pair.pending, chunk]);
    while (pair.pending.length >= 4) {
      const length = pair.pending.readUIntLE(0, 3);
      if (pair.pending.length < 4 + length) return;
      const payload = pair.pending.subarray(4, 4 + length);
      pair.pending = pair.pending.subarray(4 + length);
      if (payload[0] === COM_QUERY) pair.onAnswer = this.#onQuery?.(payload.subarray(1).toString('utf8')) ?? pair.onAnswer;
    }
  }

  /** `write` now, or after delayMs (timers of one delay fire in the order they were set: bytes keep their order). */
  #later(write: () => void): void {
    if (this.delayMs === 0) write();
    else setTimeout(write, this.delayMs);
  }

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
    const server = connect(this.#targetPort, this.#targetHost);
    client.setNoDelay(true);
    server.setNoDelay(true);
    const pair: Pair = {
      client,
      server,
      lastActive: Date.now(),
      forgotten: false,
      stalled: false,
      pending: Buffer.alloc(0),
      onAnswer: undefined,
    };
    this.#pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      if (pair.forgotten) {
        client.resetAndDestroy();
        return;
      }
      if (pair.stalled) return;
      pair.lastActive = Date.now();
      this.requests++;
      if (this.#onQuery !== undefined) this.#readQueries(pair, chunk);
      this.#later(() => server.destroyed || server.write(chunk));
    });
    server.on('data', (chunk: Buffer) => {
      pair.lastActive = Date.now();
      const onAnswer = pair.onAnswer;
      pair.onAnswer = undefined;
      if (onAnswer?.(chunk, () => client.destroyed || client.write(chunk)) === 'drop') return;
      if (!pair.forgotten && !pair.stalled) this.#later(() => client.destroyed || client.write(chunk));
    });
    // Delayed as the bytes are, so what was in flight arrives first.
    const close = () =>
      this.#later(() => {
        this.#pairs.delete(pair);
        client.destroy();
        server.destroy();
      });
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
