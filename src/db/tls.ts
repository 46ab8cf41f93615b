/**
 * How punctual reaches its database beyond the URL: the password (kept out of DATABASE_URL) and
 * TLS, in the modes MySQL's own client names. `required` encrypts and verifies nothing (a man in
 * the middle is not detected); `verify-ca` checks the certificate chain against the CA;
 * `verify-identity` also checks that the certificate names the host connected to.
 *
 * mysql2 checks the chain; the name is checked here (checkIdentity), against the host the socket
 * went to, never by mysql2: given an IP address, mysql2 sends no server name and Node then checks
 * the certificate against "localhost", which a certificate for localhost passes; and with
 * several hosts the pool opens its sockets itself (hosts.ts) and mysql2 knows only the first
 * host's name. Checked here, each host is held to its own name or address.
 */
import tls from 'node:tls';
import type mysql from 'mysql2/promise';

export type SslMode = 'disabled' | 'required' | 'verify-ca' | 'verify-identity';

export interface DatabaseAccess {
  password?: string;
  sslMode?: SslMode;
  /** PEM contents. */
  sslCa?: { content: Buffer };
  sslCert?: { content: Buffer };
  sslKey?: { content: Buffer };
}

/** mysql2's options for `access`: the chain is checked by mysql2, the name by checkIdentity. */
export function accessOptions(access: DatabaseAccess = {}): mysql.ConnectionOptions {
  const options: mysql.ConnectionOptions = {};
  if (access.password !== undefined) options.password = access.password;
  const mode = access.sslMode ?? 'disabled';
  if (mode === 'disabled') return options;
  const verify = mode !== 'required';
  options.ssl = {
    ...(access.sslCa !== undefined && verify ? { ca: access.sslCa.content } : {}),
    ...(access.sslCert !== undefined ? { cert: access.sslCert.content } : {}),
    ...(access.sslKey !== undefined ? { key: access.sslKey.content } : {}),
    rejectUnauthorized: verify,
    verifyIdentity: false,
  };
  return options;
}

/** Whether the host name must be checked by checkIdentity (verify-identity). */
export function checksIdentity(access: DatabaseAccess = {}): boolean {
  return access.sslMode === 'verify-identity';
}

/** The TLS socket under a mysql2 connection, when it upgraded to TLS. */
function tlsSocketOf(stream: unknown): tls.TLSSocket | undefined {
  return stream instanceof tls.TLSSocket ? stream : undefined;
}

/**
 * The error (as tls.checkServerIdentity gives it) when the certificate the server showed on
 * `stream` does not name `host`; undefined when it does. A stream that is not TLS is an error too:
 * verify-identity never accepts a plain connection.
 */
export function checkIdentity(stream: unknown, host: string): Error | undefined {
  const socket = tlsSocketOf(stream);
  if (socket === undefined) return new Error('the database connection is not TLS');
  return tls.checkServerIdentity(host.replace(/^\[(.*)\]$/, '$1'), socket.getPeerCertificate());
}

/**
 * checkIdentity for every connection of a pool, through TLS session resumption. mysql2 keeps the
 * session of each connection whose chain the CA vouched for and resumes it on the next connection
 * to that host; a resumed session shows no certificate, so there is no name to check. Only a
 * server holding the ticket keys of one that made a full handshake with us can resume, so such a
 * session is accepted while no name has been refused. Once one has, that server's ticket may be
 * in mysql2's cache: resumed sessions are refused from then on, and those accepted before are ended.
 */
export class NameCheck {
  #refusedOnce = false;
  /** The accepted resumed sessions' sockets, and how to end each one's connection. */
  readonly #resumed = new Map<object, () => void>();

  /** Why the connection on `stream`, opened to `host`, may not be used; `end` ends it later if need be. */
  check(stream: unknown, host: string, end: () => void): Error | undefined {
    const socket = tlsSocketOf(stream);
    if (socket?.isSessionReused() === true) {
      if (this.#refusedOnce) return new Error('a resumed TLS session, after a certificate that did not name its host: refused');
      this.#resumed.set(socket, end);
      socket.once('close', () => this.#resumed.delete(socket));
      return undefined;
    }
    const refused = checkIdentity(stream, host);
    if (refused !== undefined && !this.#refusedOnce) {
      this.#refusedOnce = true;
      for (const endIt of this.#resumed.values()) endIt();
      this.#resumed.clear();
    }
    return refused;
  }
}
