<?php

declare(strict_types=1);

namespace Punctual;

use Punctual\Exception\WebhookVerificationException;
use Punctual\Replay\ReplayGuard;

/**
 * The shop's side of punctual's webhook: is this call from punctual, for this request, fresh, and new?
 *
 * punctual signs every call: `X-Punctual-Signature: t=<epoch ms>,v2=<hex>[,v2=<hex>]`, one `v2`
 * per key it holds for the receiving host (two while a key rotation is under way). The signed text
 * is five lines joined by "\n" (see signedText()): `t`, the method, the full URL punctual called
 * (WHATWG form, no fragment), the Idempotency-Key, and the hex SHA-256 of the raw body. A call passes when
 * - its `t` is within `toleranceMs` of the receiver's clock (either way: clocks differ),
 * - some `v2` is the HMAC-SHA256 of that text under a secret the receiver holds (give the current
 *   and the next secret during a rotation), compared in constant time,
 * - and, with a ReplayGuard, this signed call was not accepted before. Webhooks are
 *   at-least-once: a repeat *attempt* of a task is a new call (new `t`, same Idempotency-Key),
 *   which passes here; drop it by its Idempotency-Key as the business requires.
 *
 * The URL is the one part a receiver must rebuild rather than read: verifyCurrentRequest() takes
 * it from the request (scheme, Host, REQUEST_URI), or from the public base URL it is given when a
 * proxy stands in front. Forwarded headers are never trusted for it. The old `v1` format
 * ("<t>.<raw body>") is not accepted: punctual no longer sends it.
 */
final class WebhookVerifier
{
    /** @var list<string> */
    private readonly array $secrets;
    /** @var \Closure(): int */
    private readonly \Closure $clock;

    /**
     * @param string|list<string> $secrets WEBHOOK_SECRET, and WEBHOOK_SECRET_NEXT during a rotation
     * @param int $toleranceMs how far `t` may be from now (default 5 minutes)
     * @param ReplayGuard|null $replays where accepted calls are remembered; null accepts a replay within the window
     * @param \Closure|null $clock now in epoch ms (tests); default the system clock
     */
    public function __construct(
        string|array $secrets,
        private readonly int $toleranceMs = 300_000,
        private readonly ?ReplayGuard $replays = null,
        ?\Closure $clock = null,
    ) {
        $secrets = array_values(array_filter((array) $secrets, static fn ($secret) => is_string($secret) && $secret !== ''));
        if ($secrets === []) {
            throw new \InvalidArgumentException('WebhookVerifier needs at least one secret (WEBHOOK_SECRET)');
        }
        $this->secrets = $secrets;
        $this->clock = $clock ?? static fn (): int => (int) floor(microtime(true) * 1000);
    }

    /**
     * Verifies one call; throws WebhookVerificationException (with its `reason`) when it must not
     * be trusted. `method`, `url` and `idempotencyKey` are the request's own; `url` is the full
     * URL punctual called (the one in the task's payload), e.g. `https://shop.example/hook?x=1`.
     */
    public function verify(string $rawBody, ?string $signatureHeader, string $method, string $url, string $idempotencyKey): void
    {
        [$timestamp, $signatures] = self::parse($signatureHeader);
        $now = ($this->clock)();
        if (abs($now - (int) $timestamp) > $this->toleranceMs) {
            throw new WebhookVerificationException(
                WebhookVerificationException::EXPIRED,
                "the signature's timestamp is " . abs($now - (int) $timestamp) . " ms from now (tolerance {$this->toleranceMs} ms)",
            );
        }
        $signed = self::signedText($timestamp, $method, self::canonicalUrl($url), $idempotencyKey, $rawBody);
        if (!$this->matches($signed, $signatures)) {
            throw new WebhookVerificationException(WebhookVerificationException::SIGNATURE, 'no v2 signature matches a secret held here');
        }
        // The signed text names the call completely (time, method, URL, key, body): it is the call's identity.
        if ($this->replays !== null && !$this->replays->firstSeen(hash('sha256', $signed), 2 * $this->toleranceMs)) {
            throw new WebhookVerificationException(WebhookVerificationException::REPLAYED, 'this signed call was accepted before');
        }
    }

    /** verify() as a yes or no. */
    public function isValid(string $rawBody, ?string $signatureHeader, string $method, string $url, string $idempotencyKey): bool
    {
        try {
            $this->verify($rawBody, $signatureHeader, $method, $url, $idempotencyKey);
            return true;
        } catch (WebhookVerificationException) {
            return false;
        }
    }

    /**
     * Verifies the request PHP is serving now (php-fpm, the built-in server, Apache's module) and
     * answers its raw body, to decode once trusted.
     *
     * @param string|null $publicBaseUrl the scheme, host and port punctual calls, e.g.
     *   `https://shop.example`, when they are not what PHP sees: behind a proxy that ends TLS or
     *   changes the Host header. Null: `http(s)://` (from `HTTPS`) + the Host header. The path and
     *   query are always REQUEST_URI's; a proxy that rewrites the path needs verify() with the URL
     *   punctual called.
     */
    public function verifyCurrentRequest(?string $publicBaseUrl = null): string
    {
        $rawBody = (string) file_get_contents('php://input');
        $this->verify(
            $rawBody,
            $_SERVER['HTTP_X_PUNCTUAL_SIGNATURE'] ?? null,
            (string) ($_SERVER['REQUEST_METHOD'] ?? ''),
            self::requestUrl($_SERVER, $publicBaseUrl),
            (string) ($_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? ''),
        );
        return $rawBody;
    }

    /**
     * The full URL of a request from PHP's `$_SERVER`: the scheme (`HTTPS`), the Host header (port
     * included, as the caller sent it) and REQUEST_URI, the request target exactly as it arrived
     * (already in the percent-encoded form punctual's URL parser wrote). `publicBaseUrl` replaces
     * the scheme and host for a receiver behind a proxy.
     *
     * @param array<string, mixed> $server
     */
    public static function requestUrl(array $server, ?string $publicBaseUrl = null): string
    {
        $target = (string) ($server['REQUEST_URI'] ?? '/');
        if ($publicBaseUrl !== null) {
            return rtrim($publicBaseUrl, '/') . $target;
        }
        $https = ($server['HTTPS'] ?? '') !== '' && strtolower((string) $server['HTTPS']) !== 'off';
        return ($https ? 'https' : 'http') . '://' . (string) ($server['HTTP_HOST'] ?? '') . $target;
    }

    /**
     * The URL as punctual writes it into the signed text, for the forms a receiver may hold that
     * the WHATWG parser would write otherwise: the scheme and host in lower case, the default port
     * (80, 443) dropped, an empty path as `/`, no fragment, no empty query (`/x?` is `/x`). The
     * path and query are left as given: pass them as they arrived (REQUEST_URI), not decoded.
     */
    public static function canonicalUrl(string $url): string
    {
        $url = explode('#', $url, 2)[0];
        if (!preg_match('~^([A-Za-z][A-Za-z0-9+.-]*)://([^/?]*)(.*)$~s', $url, $m)) {
            return $url;
        }
        $scheme = strtolower($m[1]);
        $host = strtolower($m[2]);
        if (($scheme === 'http' && str_ends_with($host, ':80')) || ($scheme === 'https' && str_ends_with($host, ':443'))) {
            $host = substr($host, 0, strrpos($host, ':'));
        }
        $rest = $m[3] === '' || $m[3][0] === '?' ? '/' . $m[3] : $m[3];
        if (str_ends_with($rest, '?') && substr_count($rest, '?') === 1) {
            $rest = substr($rest, 0, -1); // an empty query is not sent, so not signed
        }
        return "{$scheme}://{$host}{$rest}";
    }

    /**
     * The text punctual signs: five lines joined by "\n", no trailing newline —
     * `<t>\n<METHOD>\n<url>\n<Idempotency-Key>\n<hex SHA-256 of the raw body>` (the empty
     * string's hash for a call without a body).
     */
    private static function signedText(string $timestamp, string $method, string $url, string $idempotencyKey, string $rawBody): string
    {
        return implode("\n", [$timestamp, strtoupper($method), $url, $idempotencyKey, hash('sha256', $rawBody)]);
    }

    /** @param list<string> $signatures hex digests */
    private function matches(string $signed, array $signatures): bool
    {
        foreach ($this->secrets as $secret) {
            $expected = hash_hmac('sha256', $signed, $secret);
            foreach ($signatures as $signature) {
                if (hash_equals($expected, $signature)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** @return array{0: string, 1: list<string>} the timestamp and the v2 digests */
    private static function parse(?string $header): array
    {
        $timestamp = null;
        $signatures = [];
        foreach (explode(',', (string) $header) as $part) {
            [$name, $value] = array_pad(explode('=', trim($part), 2), 2, '');
            if ($name === 't' && $timestamp === null && preg_match('/^\d{1,16}$/', $value)) {
                $timestamp = $value;
            } elseif ($name === 'v2' && preg_match('/^[0-9a-f]{64}$/', $value)) {
                $signatures[] = $value;
            }
        }
        if ($timestamp === null || $signatures === []) {
            throw new WebhookVerificationException(
                WebhookVerificationException::MALFORMED,
                'X-Punctual-Signature is missing or is not t=<epoch ms>,v2=<hex>',
            );
        }
        return [$timestamp, $signatures];
    }
}
