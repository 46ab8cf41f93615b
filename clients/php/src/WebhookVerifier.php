<?php

declare(strict_types=1);

namespace Punctual;

use Punctual\Exception\WebhookVerificationException;
use Punctual\Replay\ReplayGuard;

/**
 * The shop's side of punctual's webhook: is this call from punctual, fresh, and new?
 *
 * punctual signs every call: `X-Punctual-Signature: t=<epoch ms>,v1=<hex>[,v1=<hex>]`, one `v1`
 * per secret it holds (two while a key rotation is under way). A call passes when
 * - its `t` is within `toleranceMs` of the receiver's clock (either way: clocks differ),
 * - some `v1` is the HMAC-SHA256 of the signed text under a secret the receiver holds (give the
 *   current and the next secret during a rotation), compared in constant time,
 * - and, with a ReplayGuard, this signed call was not accepted before. Webhooks are
 *   at-least-once: a repeat *attempt* of a task is a new call (new `t`, same Idempotency-Key),
 *   which passes here; drop it by its Idempotency-Key as the business requires.
 *
 * What is signed is built in one place, signedText(): today "<t>.<raw body>". When punctual signs
 * a canonical string (method, full URL, Idempotency-Key, body hash), only that method changes;
 * verify() already takes the method, URL and key it will need.
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
     * be trusted. `method`, `url` and `idempotencyKey` are the request's own.
     */
    public function verify(string $rawBody, ?string $signatureHeader, string $method = 'POST', string $url = '', string $idempotencyKey = ''): void
    {
        [$timestamp, $signatures] = self::parse($signatureHeader);
        $now = ($this->clock)();
        if (abs($now - (int) $timestamp) > $this->toleranceMs) {
            throw new WebhookVerificationException(
                WebhookVerificationException::EXPIRED,
                "the signature's timestamp is " . abs($now - (int) $timestamp) . " ms from now (tolerance {$this->toleranceMs} ms)",
            );
        }
        $signed = self::signedText($timestamp, $rawBody, strtoupper($method), $url, $idempotencyKey);
        if (!$this->matches($signed, $signatures)) {
            throw new WebhookVerificationException(WebhookVerificationException::SIGNATURE, 'no v1 signature matches a secret held here');
        }
        // The Idempotency-Key is part of the identity: two tasks may send the same body in the same millisecond.
        if ($this->replays !== null && !$this->replays->firstSeen(hash('sha256', $signed . "\n" . $idempotencyKey), 2 * $this->toleranceMs)) {
            throw new WebhookVerificationException(WebhookVerificationException::REPLAYED, 'this signed call was accepted before');
        }
    }

    /** verify() as a yes or no. */
    public function isValid(string $rawBody, ?string $signatureHeader, string $method = 'POST', string $url = '', string $idempotencyKey = ''): bool
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
     * answers its raw body, to decode once trusted. Behind a proxy that rewrites the host or path,
     * call verify() with the URL punctual called.
     */
    public function verifyCurrentRequest(): string
    {
        $rawBody = (string) file_get_contents('php://input');
        $https = ($_SERVER['HTTPS'] ?? '') !== '' && ($_SERVER['HTTPS'] ?? '') !== 'off';
        $url = ($https ? 'https' : 'http') . '://' . ($_SERVER['HTTP_HOST'] ?? '') . ($_SERVER['REQUEST_URI'] ?? '/');
        $this->verify(
            $rawBody,
            $_SERVER['HTTP_X_PUNCTUAL_SIGNATURE'] ?? null,
            (string) ($_SERVER['REQUEST_METHOD'] ?? 'POST'),
            $url,
            (string) ($_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? ''),
        );
        return $rawBody;
    }

    /**
     * The text punctual signs. The one place to change when the signed format changes; the
     * parameters not used yet are the ones the canonical form will add.
     */
    private static function signedText(string $timestamp, string $rawBody, string $method, string $url, string $idempotencyKey): string
    {
        return $timestamp . '.' . $rawBody;
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

    /** @return array{0: string, 1: list<string>} the timestamp and the v1 digests */
    private static function parse(?string $header): array
    {
        $timestamp = null;
        $signatures = [];
        foreach (explode(',', (string) $header) as $part) {
            [$name, $value] = array_pad(explode('=', trim($part), 2), 2, '');
            if ($name === 't' && $timestamp === null && preg_match('/^\d{1,16}$/', $value)) {
                $timestamp = $value;
            } elseif ($name === 'v1' && preg_match('/^[0-9a-f]{64}$/', $value)) {
                $signatures[] = $value;
            }
        }
        if ($timestamp === null || $signatures === []) {
            throw new WebhookVerificationException(
                WebhookVerificationException::MALFORMED,
                'X-Punctual-Signature is missing or is not t=<epoch ms>,v1=<hex>',
            );
        }
        return [$timestamp, $signatures];
    }
}
