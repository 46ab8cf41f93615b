/**
 * DATABASE_URL with several hosts, for a Galera cluster or a primary with stand-bys behind it:
 *
 *   mysql://user:password@host1:3306,host2:3306,host3:3306/punctual
 *
 * All hosts share the user, password, database and options. New connections go to one host at a
 * time, the first that answers; when a connection to it cannot be made (or the node says it is
 * not ready), the next ones go to the next host in the list, round the list. Writing through one
 * node at a time keeps Galera's certification conflicts rare.
 */
import net from 'node:net';

export interface DatabaseHost {
  host: string;
  port: number;
}

export interface ParsedDatabaseUrl {
  hosts: DatabaseHost[];
  /** One mysql:// URL per host, in the order given: same user, password, path and options. */
  urls: string[];
}

export class DatabaseUrlError extends Error {}

const DEFAULT_PORT = 3306;

/** `host`, `host:port` or `[v6]:port`. */
function parseHost(entry: string): DatabaseHost {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(entry);
  if (match === null) throw new DatabaseUrlError(`DATABASE_URL has a host that is not host or host:port: ${JSON.stringify(entry)}`);
  const port = match[2] === undefined ? DEFAULT_PORT : Number(match[2]);
  if (port < 1 || port > 65535) throw new DatabaseUrlError(`DATABASE_URL has a port out of range: ${JSON.stringify(entry)}`);
  return { host: match[1]!, port };
}

/**
 * Splits a DATABASE_URL into its hosts. A URL with one host comes back as it was. Messages never
 * quote the user information (it may hold a password).
 */
export function parseDatabaseUrl(url: string): ParsedDatabaseUrl {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url);
  if (scheme === null) throw new DatabaseUrlError('DATABASE_URL is not a URL (mysql://user:password@host:port/database)');
  const rest = url.slice(scheme[0].length);
  // The authority ends at the first '/', '?' or '#' after the user information.
  const at = rest.lastIndexOf('@', searchEnd(rest));
  const userinfo = at === -1 ? '' : rest.slice(0, at + 1);
  const afterUser = rest.slice(at + 1);
  const end = searchEnd(afterUser);
  const hostList = afterUser.slice(0, end);
  const tail = afterUser.slice(end);
  const entries = hostList.split(',').map((entry) => entry.trim());
  if (entries.some((entry) => entry === '')) {
    throw new DatabaseUrlError('DATABASE_URL has an empty host in its host list (host1:port,host2:port)');
  }
  const hosts = entries.map(parseHost);
  if (hosts.length === 1) return { hosts, urls: [url] };
  const urls = hosts.map(({ host, port }) => `${scheme[0]}${userinfo}${host}:${port}${tail}`);
  return { hosts, urls };
}

/** Where the authority of `text` (no scheme) ends: before the first '/', '?' or '#'. */
function searchEnd(text: string): number {
  const found = text.search(/[/?#]/);
  return found === -1 ? text.length : found;
}

/**
 * The socket this rotation opened, under `socket`: a connection upgraded to TLS runs on a
 * TLSSocket wrapped around it (Node keeps the wrapped socket as `_parent`).
 */
function rawSocketOf(socket: object): object {
  return (socket as { _parent?: object | null })._parent ?? socket;
}

/**
 * Which host new connections go to. `connect` opens a socket to the current host; a socket that
 * closes before the pool saw its connection ready (refused, timed out, refused at handshake)
 * moves the next connections to the next host. So does `failed()` for a connection to a node
 * that answers but is not ready.
 */
export class HostRotation {
  readonly hosts: DatabaseHost[];
  #current = 0;
  readonly #hostOf = new WeakMap<object, number>();
  readonly #ready = new WeakSet<object>();
  readonly #onSwitch: ((from: DatabaseHost, to: DatabaseHost) => void) | undefined;

  constructor(hosts: DatabaseHost[], onSwitch?: (from: DatabaseHost, to: DatabaseHost) => void) {
    if (hosts.length === 0) throw new DatabaseUrlError('DATABASE_URL names no host');
    this.hosts = hosts;
    this.#onSwitch = onSwitch;
  }

  /** The host new connections go to now. */
  get current(): DatabaseHost {
    return this.hosts[this.#current]!;
  }

  /** The index of the host `socket` was opened to (undefined for a socket not opened here). */
  hostOf(socket: object | undefined): number | undefined {
    return socket === undefined ? undefined : this.#hostOf.get(rawSocketOf(socket));
  }

  /** A socket to the current host, for mysql2's `stream` option. */
  connect(keepAliveInitialDelayMs: number): net.Socket {
    const index = this.#current;
    const { host, port } = this.hosts[index]!;
    const socket = net.connect({ host: host.replace(/^\[(.*)\]$/, '$1'), port });
    this.#hostOf.set(socket, index);
    socket.setNoDelay(true);
    socket.once('connect', () => socket.setKeepAlive(true, keepAliveInitialDelayMs));
    // On 'error' too, which comes first: a caller retrying at once is sent to the next host.
    const unready = () => {
      if (!this.#ready.has(socket)) this.#failed(index);
    };
    socket.once('error', unready);
    socket.once('close', unready);
    return socket;
  }

  /** The pool made a connection on `socket`: the host answers. */
  ready(socket: object | undefined): void {
    if (socket !== undefined) this.#ready.add(rawSocketOf(socket));
  }

  /** The connection on `socket` found its node unusable: new connections go elsewhere. */
  failed(socket: object | undefined): void {
    const index = this.hostOf(socket);
    if (index !== undefined) this.#failed(index);
  }

  #failed(index: number): void {
    // Only the first failure of the current host moves on: a burst of failed connections to one
    // host moves once, not once per connection.
    if (index !== this.#current || this.hosts.length === 1) return;
    const from = this.hosts[index]!;
    this.#current = (index + 1) % this.hosts.length;
    this.#onSwitch?.(from, this.hosts[this.#current]!);
  }
}
