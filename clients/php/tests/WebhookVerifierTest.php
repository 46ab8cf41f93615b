<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Exception\WebhookVerificationException;
use Punctual\Replay\MemoryReplayGuard;
use Punctual\Tests\Support\Receiver;
use Punctual\Tests\Support\ServiceTestCase;
use Punctual\WebhookVerifier;

/**
 * WebhookVerifier against real calls from punctual: a receiver (PHP's built-in server, verifying
 * as a shop would) gets them, records them, and the recorded calls are then replayed, tampered
 * with and checked with other secrets and clocks.
 */
final class WebhookVerifierTest extends ServiceTestCase
{
    private static Receiver $receiver;
    /** @var array{method: string, uri: string, headers: array<string, string>, body: string, verified: bool} */
    private static array $call;

    public static function setUpBeforeClass(): void
    {
        self::$receiver = new Receiver();
        $name = self::unique('hook');
        $task = self::client()->create('webhook', [
            'url' => self::$receiver->baseUrl . "/hook/{$name}?shop=1",
            'body' => ['orderSn' => 'SN-hook', 'note' => 'ü/€'],
        ], delayMs: 0)->task;
        self::$call = self::waitFor(fn () => self::$receiver->requests($name)[0] ?? null, 15_000, 'punctual to call the receiver');
        self::waitFor(fn () => self::client()->get($task->id)->status === 'done', 15_000, 'the webhook task to be done');
    }

    public static function tearDownAfterClass(): void
    {
        self::$receiver->stop();
    }

    private static function verifier(array $secrets, ?int $at = null, bool $replays = false): WebhookVerifier
    {
        return new WebhookVerifier($secrets, 300_000, $replays ? new MemoryReplayGuard() : null, $at === null ? null : fn () => $at);
    }

    private static function reason(WebhookVerifier $verifier, string $body, ?string $header): ?string
    {
        try {
            $verifier->verify($body, $header, 'POST', '', self::$call['headers']['idempotency-key']);
            return null;
        } catch (WebhookVerificationException $error) {
            return $error->reason;
        }
    }

    private static function timestamp(): int
    {
        preg_match('/t=(\d+)/', self::$call['headers']['x-punctual-signature'], $m);
        return (int) $m[1];
    }

    public function testTheReceiverAcceptedTheRealCall(): void
    {
        self::assertTrue(self::$call['verified'], 'verifyCurrentRequest on the real call');
        self::assertSame('POST', self::$call['method']);
        self::assertSame(['orderSn' => 'SN-hook', 'note' => 'ü/€'], json_decode(self::$call['body'], true));
        // Signed with both secrets during the rotation.
        self::assertSame(2, substr_count(self::$call['headers']['x-punctual-signature'], 'v1='));
        self::assertStringStartsWith('punctual-', self::$call['headers']['idempotency-key']);
    }

    public function testPassesWithTheCurrentOrTheNextSecretAndFailsWithAnother(): void
    {
        $header = self::$call['headers']['x-punctual-signature'];
        self::assertNull(self::reason(self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET')]), self::$call['body'], $header));
        // A receiver already moved to the next secret keeps accepting during the rotation.
        self::assertNull(self::reason(self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')]), self::$call['body'], $header));
        self::assertSame('signature', self::reason(self::verifier(['not-the-secret']), self::$call['body'], $header));
        self::assertTrue(self::verifier(['not-the-secret', getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')], self::timestamp())->isValid(self::$call['body'], $header));
    }

    public function testFailsWhenTheBodyOrTheSignatureWasTamperedWith(): void
    {
        $verifier = self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET'), getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')], self::timestamp());
        $header = self::$call['headers']['x-punctual-signature'];
        $body = self::$call['body'];
        self::assertNull(self::reason($verifier, $body, $header));
        self::assertSame('signature', self::reason($verifier, str_replace('SN-hook', 'SN-hooK', $body), $header));
        self::assertSame('signature', self::reason($verifier, $body . ' ', $header));
        // The timestamp is signed too: moving it breaks the signature.
        $moved = preg_replace('/t=(\d+)/', 't=' . (self::timestamp() + 1), $header);
        self::assertSame('signature', self::reason($verifier, $body, $moved));
        self::assertSame('malformed', self::reason($verifier, $body, null));
        self::assertSame('malformed', self::reason($verifier, $body, 'v1=' . str_repeat('0', 64)));
        self::assertSame('malformed', self::reason($verifier, $body, 't=' . self::timestamp()));
    }

    public function testFailsWhenTheTimestampIsOutsideTheTolerance(): void
    {
        $secrets = [getenv('PUNCTUAL_WEBHOOK_SECRET')];
        $header = self::$call['headers']['x-punctual-signature'];
        $t = self::timestamp();
        self::assertNull(self::reason(self::verifier($secrets, $t + 300_000), self::$call['body'], $header));
        self::assertSame('expired', self::reason(self::verifier($secrets, $t + 300_001), self::$call['body'], $header));
        self::assertSame('expired', self::reason(self::verifier($secrets, $t - 300_001), self::$call['body'], $header));
    }

    public function testFailsWhenTheSameCallComesAgain(): void
    {
        $verifier = self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET')], self::timestamp(), true);
        $header = self::$call['headers']['x-punctual-signature'];
        self::assertNull(self::reason($verifier, self::$call['body'], $header));
        self::assertSame('replayed', self::reason($verifier, self::$call['body'], $header));
        // Dropping one of the two signatures does not make it a new call.
        $one = preg_replace('/,v1=[0-9a-f]+$/', '', $header);
        self::assertNotSame($header, $one);
        self::assertSame('replayed', self::reason($verifier, self::$call['body'], $one));
    }

    public function testTheReceiverRefusesTheRecordedCallSentAgain(): void
    {
        $name = 'replayed' . bin2hex(random_bytes(3));
        $send = function (string $body) use ($name): int {
            $curl = curl_init(self::$receiver->baseUrl . "/hook/{$name}");
            curl_setopt_array($curl, [
                CURLOPT_POSTFIELDS => $body,
                CURLOPT_RETURNTRANSFER => true,
                CURLOPT_HTTPHEADER => [
                    'Content-Type: application/json',
                    'Idempotency-Key: ' . self::$call['headers']['idempotency-key'],
                    'X-Punctual-Signature: ' . self::$call['headers']['x-punctual-signature'],
                ],
            ]);
            curl_exec($curl);
            return (int) curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
        };
        self::assertSame(401, $send(self::$call['body']));
        self::assertSame(401, $send(str_replace('SN-hook', 'SN-evil', self::$call['body'])));
        self::assertSame(['replayed', 'signature'], array_column(self::$receiver->requests($name), 'reason'));
    }
}
