/**
 * Which headers a webhook payload may set: none that a receiver or its proxy takes as the network's
 * word about a call (who the caller is, which method or URL is meant, the framing, punctual's own),
 * since a payload setting one could pass for another caller, method, URL or task. Two layers: a
 * name is letters, digits and `-` only (a CGI-style receiver reads `X_Real_IP` as `X-Real-IP`);
 * then a list of names and prefixes, compared in lower case.
 * See docs/architecture.md#headers-a-payload-may-not-set.
 */

const NAME = /^[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*$/;

const RESERVED_NAMES = new Set([
  // The connection and the framing of the body (RFC 9110 §7.6.1, RFC 9112).
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'max-forwards',
  'http2-settings',
  // punctual's own: the receiver checks the call, and knows who made it, by them.
  'idempotency-key',
  'user-agent',
  // The caller's address, scheme and host, as a proxy or CDN writes them.
  'forwarded',
  'forwarded-for',
  'via',
  'x-forwarded',
  'x-real-ip',
  'x-client-ip',
  'client-ip',
  'true-client-ip',
  'x-true-client-ip',
  'x-cluster-client-ip',
  'x-original-forwarded-for',
  'x-originating-ip',
  'x-remote-ip',
  'x-remote-addr',
  'x-proxyuser-ip',
  'wl-proxy-client-ip',
  'ali-cdn-real-ip',
  'cdn-src-ip',
  'eo-connecting-ip',
  'x-host',
  'x-original-host',
  'x-http-host-override',
  'front-end-https',
  'x-url-scheme',
  'origin',
  // The caller's identity, as an authenticating proxy writes it.
  'remote-user',
  'x-remote-user',
  'x-authenticated-user',
  'x-authenticated-userid',
  'x-credential-identifier',
  'x-client-cert',
  'x-client-verify',
  'x-goog-iap-jwt-assertion',
  // Another method or URL than the one called.
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-method',
  'x-original-url',
  'x-original-uri',
  'x-rewrite-url',
  'x-override-url',
]);

const RESERVED_PREFIXES = [
  'x-punctual-',
  'proxy-',
  'x-forwarded-',
  // Fetch metadata: a receiver may trust Sec-Fetch-Site as a browser's word.
  'sec-',
  // CDNs and platforms.
  'cf-',
  'fastly-',
  'akamai-',
  'x-akamai-',
  'cloudfront-',
  'x-amz-cf-',
  'x-amzn-',
  'x-azure-',
  'x-appengine-',
  'x-vercel-',
  'x-nf-',
  'fly-',
  'x-envoy-',
  // Authenticating proxies (oauth2-proxy, Grafana, Kong, Google IAP, Azure App Service) and TLS terminators.
  'x-auth-request-',
  'x-webauth-',
  'x-consumer-',
  'x-goog-authenticated-user-',
  'x-ms-client-principal',
  'x-ms-token-',
  'x-ssl-',
  'ssl-client-',
  'x-client-cert-',
  'x-arr-',
];

/** True when a payload may not set the header `name`. */
export function reservedHeader(name: string): boolean {
  if (!NAME.test(name)) return true;
  const lower = name.toLowerCase();
  return RESERVED_NAMES.has(lower) || RESERVED_PREFIXES.some((prefix) => lower.startsWith(prefix));
}

/** The first header of `headers` a payload may not set, as it was written, or undefined. */
export function firstReserved(headers: Record<string, string> | undefined): string | undefined {
  return Object.keys(headers ?? {}).find(reservedHeader);
}
