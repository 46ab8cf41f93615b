/**
 * Where a webhook may go: a host listed in WEBHOOK_ALLOWED_HOSTS (`host`, any port, or
 * `host:port`), and an internal address (anything but global unicast, IPv4 inside IPv6 included)
 * only when that address itself is listed. The check runs in the connector, on the (address, port)
 * pair the socket is then opened to, so the answer cannot change between the check and the connect.
 * Ranges come from ipaddr.js. undici is loaded with the first call (`client()`): a process
 * that sends no webhook never evaluates it (about 10 ms of a start otherwise).
 * See docs/architecture.md#where-a-webhook-may-go.
 */
import { lookup as dnsLookup } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Agent, buildConnector, request } from 'undici';

/** IPv6 addresses outside 2000::/3 are not on the public internet (::/96 IPv4-compatible among them). */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

function bare(address: string): string {
  return address.replace(/^\[|\]$/g, '').toLowerCase();
}

/** True for an address inside the shop's walls (or nobody's): anything but global unicast. */
export function isInternalAddress(address: string): boolean {
  const text = bare(address);
  if (isIP(text) === 0) return false;
  let parsed = ipaddr.parse(text);
  if (parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress()) parsed = parsed.toIPv4Address();
  if (parsed instanceof ipaddr.IPv4) return parsed.range() !== 'unicast';
  return parsed.range() !== 'unicast' || !parsed.match(GLOBAL_UNICAST);
}

interface Entry {
  /** Lower case; an IPv6 address without brackets. */
  host: string;
  /** undefined: any port. */
  port: number | undefined;
}

function entryOf(text: string): Entry {
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(text.toLowerCase());
  return { host: bare(match?.[1] ?? text), port: match?.[2] === undefined ? undefined : Number(match[2]) };
}

/** The port a URL connects to. */
export function portOf(url: URL): number {
  return url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
}

/** Does a `host` / `host:port` list name this host and port? */
export function listed(entries: string[], host: string, port: number): boolean {
  const name = bare(host);
  return entries.map(entryOf).some((entry) => entry.host === name && (entry.port === undefined || entry.port === port));
}

/**
 * Loads undici (a chunk of its own, left out of the start: B0) into the module cache, for the
 * first webhook call not to pay its parse: called once the service is ready. The first calls of a
 * just-started process ran 45-80 ms late for it, where the rest ran within 27 ms.
 */
export function preloadHttpClient(): Promise<void> {
  return loadUndici().then(
    () => undefined,
    () => undefined,
  );
}

/** undici, a chunk of its own: loaded at the first call of a webhook, or by preloadHttpClient. */
function loadUndici() {
  return import('undici');
}

export class Egress {
  readonly #allowed: string[];
  #client: Promise<{ agent: Agent; request: typeof request }> | undefined;

  constructor(allowedHosts: string[]) {
    this.#allowed = allowedHosts;
  }

  /** undici's `request` and the agent whose connector checks each address; loaded and made at the first call. */
  client(): Promise<{ agent: Agent; request: typeof request }> {
    // undici is CommonJS: its exports are the default export's (named ones exist only where
    // Node reads them from the source; the bundle's lazy chunk has the default alone).
    this.#client ??= loadUndici().then(({ default: undici }) => ({
      agent: this.#agent(undici.Agent, undici.buildConnector),
      request: undici.request,
    }));
    return this.#client;
  }

  #agent(AgentClass: typeof Agent, connector: typeof buildConnector): Agent {
    const connect = connector({});
    return new AgentClass({
      connect: (options, callback) => {
        const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
        dnsLookup(options.hostname, { all: true }, (error, addresses) => {
          if (error !== null) return callback(error, null);
          const refused = addresses.map(({ address }) => this.#addressRefusal(address, port)).find((reason) => reason !== undefined);
          if (refused !== undefined || addresses.length === 0) {
            const reason = refused ?? 'resolves to no address';
            return callback(Object.assign(new Error(`${options.hostname}: ${reason}`), { code: 'EPUNCTUALREFUSED' }), null);
          }
          // Connect to the very address checked; TLS still checks the certificate against the URL's name.
          connect({ ...options, hostname: addresses[0]!.address }, callback);
        });
      },
    });
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
    const port = portOf(parsed);
    if (!listed(this.#allowed, parsed.hostname, port)) {
      return `host ${parsed.host} is not in WEBHOOK_ALLOWED_HOSTS`;
    }
    return this.#addressRefusal(parsed.hostname, port);
  }

  /** An internal address may be called only where the list names it, with this port if the entry has one. */
  #addressRefusal(address: string, port: number): string | undefined {
    const text = bare(address);
    if (isIP(text) === 0 || !isInternalAddress(text) || listed(this.#allowed, text, port)) return undefined;
    const shown = isIP(text) === 6 ? `[${text}]` : text;
    return `address ${text} is internal (private, loopback or link-local): list ${shown}:${port} (or the address) in WEBHOOK_ALLOWED_HOSTS to allow it`;
  }
}
