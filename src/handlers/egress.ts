/**
 * Where a webhook may go. A timer service that calls any URL it is given is an open door into
 * the shop's network, so:
 *
 * - the URL's host must be listed in WEBHOOK_ALLOWED_HOSTS (`host`, any port, or `host:port`);
 * - a private, loopback, link-local or otherwise internal address is refused unless that address
 *   itself is listed. A listed name that resolves to one (DNS rebinding, or a name pointed at
 *   the metadata service) is refused too. The check runs on the addresses the connection then
 *   uses, so the answer cannot change between the check and the connect.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { Agent } from 'undici';

const internal = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  internal.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
] as const) {
  internal.addSubnet(network, prefix, 'ipv6');
}

/** True for an address inside the shop's walls (or nobody's): private, loopback, link-local… */
export function isInternalAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped !== null) return internal.check(mapped[1]!, 'ipv4');
  const family = isIP(bare);
  if (family === 4) return internal.check(bare, 'ipv4');
  if (family === 6) return internal.check(bare, 'ipv6');
  return false;
}

export class Egress {
  /** Listed hosts, lower case: `name` or `name:port`, IPv6 in brackets. */
  readonly #allowed: string[];
  /** Listed internal addresses, bare (no brackets, no port). */
  readonly #listedAddresses: Set<string>;
  readonly dispatcher: Agent;

  constructor(allowedHosts: string[]) {
    this.#allowed = allowedHosts;
    this.#listedAddresses = new Set(
      allowedHosts.map((entry) => entry.replace(/:\d+$/, '').replace(/^\[|\]$/g, '')).filter((host) => isIP(host) !== 0),
    );
    this.dispatcher = new Agent({ connect: { lookup: (hostname, options, callback) => this.#lookup(hostname, options, callback) } });
  }

  /** Why `url` may not be called, or undefined when it may (before any name is resolved). */
  refusal(url: string): string | undefined {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return 'is not a URL';
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'must be http or https';
    if (parsed.username !== '' || parsed.password !== '') return 'must not carry credentials; use headers';
    const host = parsed.hostname.toLowerCase();
    const port = parsed.port === '' ? (parsed.protocol === 'https:' ? '443' : '80') : parsed.port;
    if (!this.#allowed.some((entry) => entry === host || entry === `${host}:${port}`)) {
      return `host ${parsed.host} is not in WEBHOOK_ALLOWED_HOSTS`;
    }
    return this.#addressRefusal(host);
  }

  #addressRefusal(address: string): string | undefined {
    const bare = address.replace(/^\[|\]$/g, '').toLowerCase();
    if (isIP(bare) === 0 || !isInternalAddress(bare) || this.#listedAddresses.has(bare)) return undefined;
    return `address ${bare} is internal (private, loopback or link-local): list the address itself in WEBHOOK_ALLOWED_HOSTS to allow it`;
  }

  /** dns.lookup, refusing internal addresses that are not listed. */
  #lookup(
    hostname: string,
    options: object,
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) return callback(error, []);
      const refused = addresses.map(({ address }) => this.#addressRefusal(address)).find((reason) => reason !== undefined);
      if (refused !== undefined) {
        return callback(Object.assign(new Error(`${hostname}: ${refused}`), { code: 'EPUNCTUALREFUSED' }), []);
      }
      if ((options as { all?: boolean }).all === true) return callback(null, addresses);
      const [first] = addresses;
      return callback(null, first?.address ?? '', first?.family);
    });
  }
}
