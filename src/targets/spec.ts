/**
 * TARGETS, read: comma-separated `name=url#kind:destination[?option=value]`, e.g.
 *
 *   orders=redis://127.0.0.1:6379#stream:orders?maxlen=100000
 *   sale=amqp://guest:guest@127.0.0.1:5672/shop#exchange:shop/sale.start
 *   audit=nats://127.0.0.1:4222#subject:shop.audit
 *
 * The URL's scheme says the broker (redis/rediss, amqp/amqps, nats/tls); the fragment says where
 * in it: a Redis stream (with an optional approximate MAXLEN), an AMQP exchange and routing key,
 * a NATS JetStream subject. URLs hold credentials: an error names the entry by its position and
 * name, never its text.
 */
import type { TargetKind } from './target.js';

export interface TargetSpec {
  name: string;
  kind: TargetKind;
  /** The broker's URL, credentials included (never logged: redactCredentials). */
  url: string;
  /** Redis: the stream; AMQP: the exchange; NATS: the subject. */
  destination: string;
  /** AMQP: the routing key. */
  routingKey?: string;
  /** Redis: XADD MAXLEN ~ this. */
  maxLen?: number;
}

export class TargetSpecError extends Error {
  override name = 'TargetSpecError';
}

const NAME = /^[a-z0-9_-]{1,64}$/i;
const SCHEMES: Record<string, TargetKind> = {
  'redis:': 'redis',
  'rediss:': 'redis',
  'amqp:': 'amqp',
  'amqps:': 'amqp',
  'nats:': 'nats',
  'tls:': 'nats',
};
const FRAGMENT: Record<TargetKind, string> = { redis: 'stream', amqp: 'exchange', nats: 'subject' };

export function parseTargets(text: string, variable = 'TARGETS'): TargetSpec[] {
  const specs: TargetSpec[] = [];
  text.split(',').forEach((raw, index) => {
    const entry = raw.trim();
    if (entry === '') return;
    const where = `${variable} entry ${index + 1}`;
    const at = entry.indexOf('=');
    const name = entry.slice(0, Math.max(0, at));
    if (at < 1 || !NAME.test(name))
      throw new TargetSpecError(`${where} must start with a name (letters, digits, _ or -) and "=": name=url#kind:destination`);
    const rest = entry.slice(at + 1);
    const hash = rest.lastIndexOf('#');
    if (hash === -1)
      throw new TargetSpecError(`${where} (${name}) needs a destination after "#": #stream:…, #exchange:…/routing.key or #subject:…`);
    let url: URL;
    try {
      url = new URL(rest.slice(0, hash));
    } catch {
      throw new TargetSpecError(`${where} (${name}) does not hold a valid URL before "#"`);
    }
    const kind = SCHEMES[url.protocol];
    if (kind === undefined) throw new TargetSpecError(`${where} (${name}) must be a redis://, amqp:// or nats:// URL`);
    const [fragment = '', query = ''] = rest.slice(hash + 1).split('?');
    const colon = fragment.indexOf(':');
    const label = fragment.slice(0, Math.max(0, colon));
    const destination = fragment.slice(colon + 1);
    if (colon === -1 || label !== FRAGMENT[kind] || destination === '') {
      throw new TargetSpecError(`${where} (${name}) is a ${kind} target: its destination is #${FRAGMENT[kind]}:…`);
    }
    const spec: TargetSpec = { name, kind, url: rest.slice(0, hash), destination };
    if (kind === 'amqp') {
      const slash = destination.indexOf('/');
      if (slash === -1)
        throw new TargetSpecError(
          `${where} (${name}) needs #exchange:<exchange>/<routing key> (the exchange may be empty: #exchange:/queue)`,
        );
      spec.destination = destination.slice(0, slash);
      spec.routingKey = destination.slice(slash + 1);
    }
    for (const pair of query === '' ? [] : query.split('&')) {
      const [option, value = ''] = pair.split('=');
      if (kind === 'redis' && option === 'maxlen' && /^[1-9]\d{0,11}$/.test(value)) spec.maxLen = Number(value);
      else throw new TargetSpecError(`${where} (${name}): unknown option ${JSON.stringify(option)} (redis takes ?maxlen=N)`);
    }
    if (specs.some((other) => other.name === name)) throw new TargetSpecError(`${variable} names the target ${name} twice`);
    specs.push(spec);
  });
  return specs;
}
