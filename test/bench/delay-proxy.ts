/**
 * A TCP proxy that delays every chunk by a fixed time each way, in order: a database across a
 * network (1 ms each way is about a cloud zone's round trip). B9 puts it between punctual and
 * MariaDB, and between the floor and MariaDB.
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

export class DelayProxy {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;
  /** Chunks sent from the client side to the database: about one per round trip. */
  requests = 0;

  constructor(
    readonly delayMs: number,
    private readonly targetHost = '127.0.0.1',
    private readonly targetPort = 3306,
  ) {}

  async start(): Promise<this> {
    this.#server = createServer((client) => this.#accept(client));
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as { port: number }).port;
    return this;
  }

  url(database: string): string {
    return `mysql://root@127.0.0.1:${this.port}/${database}`;
  }

  #accept(client: Socket): void {
    const server = connect(this.targetPort, this.targetHost);
    client.setNoDelay(true);
    server.setNoDelay(true);
    for (const socket of [client, server]) this.#sockets.add(socket);
    // Timers of the same delay fire in the order they were set: the bytes keep their order.
    const relay = (from: Socket, to: Socket) =>
      from.on('data', (chunk: Buffer) => {
        setTimeout(() => {
          if (!to.destroyed) to.write(chunk);
        }, this.delayMs);
      });
    relay(client, server);
    relay(server, client);
    client.on('data', () => this.requests++);
    const close = () => {
      setTimeout(() => {
        client.destroy();
        server.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(server);
      }, this.delayMs);
    };
    client.on('close', close).on('error', close);
    server.on('close', close).on('error', close);
  }

  async stop(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}
