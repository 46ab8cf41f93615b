<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Exception\WebhookVerificationException;
use Punctual\Replay\MemoryReplayGuard;
use Punctual\Tests\Support\Receiver;
use Punctual\Tests\Support\ServiceTestCase;
use Punctual\WebhookVerifier;

/**
 * WebhookVerifier against real calls from punctual: receivers (PHP's built-in server, verifying
 * as a shop would) get them, record them, and the recorded calls are then replayed, tampered
 * with and checked with other secrets, URLs and clocks. Three calls: a POST with a body, a GET
 * to a URL punctual's parser rewrites (encoding, dot segments, upper-case scheme, fragment), and
 * a POST to a host with its own key (WEBHOOK_HOST_SECRETS).
 */
final class WebhookVerifierTest extends ServiceTestCase
{
    private static Receiver $receiver;
    private static Receiver $hostReceiver;
    /** The URL the POST task was given: already in the WHATWG form punctual signs. */
    private static string $url;
    /** @var array{method: string, uri: string, headers: array<string, string>, body: string, verified: bool, reason: ?string} */
    private static array $call;
    private static string $oddName;
    /** @var array{method: string, uri: string, headers: array<string, string>, body: string, verified: bool, reason: ?string} */
    private static array $oddCall;
    private static string $hostUrl;
    /** @var array{method: string, uri: string, headers: array<string, string>, body: string, verified: bool, reason: ?string} */
    private static array $hostCall;

    public static function setUpBeforeClass(): void
    {
        self::$receiver = new Receiver();
        self::$hostReceiver = new Receiver(['RECEIVER_SECRETS' => getenv('PUNCTUAL_WEBHOOK_HOST_SECRET')], getenv('PUNCTUAL_WEBHOOK_HOST'));
        $name = self::unique('hook');
        self::$oddName = self::unique('odd');
        $hostName = self::unique('host');
        self::$url = self::$receiver->baseUrl . "/hook/{$name}?shop=1";
        self::$hostUrl = self::$hostReceiver->baseUrl . "/hook/{$hostName}";
        $tasks = [
            self::client()->create('webhook', ['url' => self::$url, 'body' => ['orderSn' => 'SN-hook', 'note' => 'ü/€']], delayMs: 0)->task,
            self::client()->create('webhook', [
                'url' => 'HTTP://' . substr(self::$receiver->baseUrl, 7) . '/hook/' . self::$oddName . '/a b/../ü?q=a b&x=ü#fragment',
                'method' => 'GET',
            ], delayMs: 0)->task,
            self::client()->create('webhook', ['url' => self::$hostUrl, 'body' => ['orderSn' => 'SN-host']], delayMs: 0)->task,
        ];
        self::$call = self::waitFor(fn () => self::$receiver->requests($name)[0] ?? null, 15_000, 'punctual to call the receiver');
        self::$oddCall = self::waitFor(fn () => self::$receiver->requests(self::$oddName)[0] ?? null, 15_000, 'punctual to call the odd URL');
        self::$hostCall = self::waitFor(fn () => self::$hostReceiver->requests($hostName)[0] ?? null, 15_000, 'punctual to call the host with its own key');
        foreach ($tasks as $task) {
            self::waitFor(fn () => self::client()->get($task->id)->status === 'done', 15_000, "webhook task {$task->id} to be done");
        }
    }

    public static function tearDownAfterClass(): void
    {
        self::$receiver->stop();
        self::$hostReceiver->stop();
    }

    private static function verifier(array $secrets, ?int $at = null, bool $replays = false): WebhookVerifier
    {
        return new WebhookVerifier($secrets, 300_000, $replays ? new MemoryReplayGuard() : null, $at === null ? null : fn () => $at);
    }

    private static function both(?int $at = null): WebhookVerifier
    {
        return self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET'), getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')], $at ?? self::timestamp());
    }

    /**
     * What the verifier says about the recorded POST call with some part changed: null when it passes.
     *
     * @param array{body?: string, header?: ?string, method?: string, url?: string, key?: string} $change
     */
    private static function reason(WebhookVerifier $verifier, array $change = []): ?string
    {
        try {
            $verifier->verify(
                $change['body'] ?? self::$call['body'],
                array_key_exists('header', $change) ? $change['header'] : self::$call['headers']['x-punctual-signature'],
                $change['method'] ?? self::$call['method'],
                $change['url'] ?? self::$url,
                $change['key'] ?? self::$call['headers']['idempotency-key'],
            );
            return null;
        } catch (WebhookVerificationException $error) {
            return $error->reason;
        }
    }

    private static function timestamp(array $call = []): int
    {
        preg_match('/t=(\d+)/', ($call ?: self::$call)['headers']['x-punctual-signature'], $m);
        return (int) $m[1];
    }

    public function testTheReceiverAcceptedTheRealCall(): void
    {
        self::assertTrue(self::$call['verified'], 'verifyCurrentRequest on the real call: ' . self::$call['reason']);
        self::assertSame('POST', self::$call['method']);
        self::assertSame(['orderSn' => 'SN-hook', 'note' => 'ü/€'], json_decode(self::$call['body'], true));
        // Signed with both secrets during the rotation, in the v2 format only.
        self::assertMatchesRegularExpression('/^t=\d+,v2=[0-9a-f]{64},v2=[0-9a-f]{64}$/', self::$call['headers']['x-punctual-signature']);
        self::assertStringStartsWith('punctual-', self::$call['headers']['idempotency-key']);
    }

    public function testTheSignedUrlIsTheOnePunctualsParserWrote(): void
    {
        // verifyCurrentRequest rebuilt it from what the built-in server saw (Host, REQUEST_URI).
        self::assertTrue(self::$oddCall['verified'], 'verifyCurrentRequest on the GET call: ' . self::$oddCall['reason']);
        self::assertSame('GET', self::$oddCall['method']);
        self::assertSame('', self::$oddCall['body']);
        $canonical = self::$receiver->baseUrl . '/hook/' . self::$oddName . '/%C3%BC?q=a%20b&x=%C3%BC';
        $verifier = self::both(self::timestamp(self::$oddCall));
        $key = self::$oddCall['headers']['idempotency-key'];
        $header = self::$oddCall['headers']['x-punctual-signature'];
        self::assertTrue($verifier->isValid('', $header, 'GET', $canonical, $key));
        // A fragment, an upper-case scheme or host and the default port are how a receiver may hold the URL.
        self::assertTrue($verifier->isValid('', $header, 'get', 'HTTP://' . substr($canonical, 7) . '#top', $key));
        // The path as given (not percent-encoded, dot segments kept) is another URL.
        self::assertFalse($verifier->isValid('', $header, 'GET', self::$receiver->baseUrl . '/hook/' . self::$oddName . '/a b/../ü?q=a b&x=ü', $key));
        // No body is signed as the empty string's hash: a body would be another call.
        self::assertFalse($verifier->isValid('{}', $header, 'GET', $canonical, $key));
    }

    public function testPassesWithTheCurrentOrTheNextSecretAndFailsWithAnother(): void
    {
        $t = self::timestamp();
        self::assertNull(self::reason(self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET')], $t)));
        // A receiver already moved to the next secret keeps accepting during the rotation.
        self::assertNull(self::reason(self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')], $t)));
        self::assertSame('signature', self::reason(self::verifier(['not-the-secret'], $t)));
        self::assertSame('signature', self::reason(self::verifier([getenv('PUNCTUAL_WEBHOOK_HOST_SECRET')], $t)));
        self::assertNull(self::reason(self::verifier(['not-the-secret', getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')], $t)));
    }

    public function testFailsWhenAnySignedPartWasTamperedWith(): void
    {
        $verifier = self::both();
        self::assertNull(self::reason($verifier));
        $body = self::$call['body'];
        self::assertSame('signature', self::reason($verifier, ['body' => str_replace('SN-hook', 'SN-hooK', $body)]));
        self::assertSame('signature', self::reason($verifier, ['body' => $body . ' ']));
        self::assertSame('signature', self::reason($verifier, ['method' => 'PUT']));
        self::assertSame('signature', self::reason($verifier, ['url' => str_replace('shop=1', 'shop=2', self::$url)]));
        self::assertSame('signature', self::reason($verifier, ['url' => str_replace('/hook/', '/hook/x', self::$url)]));
        self::assertSame('signature', self::reason($verifier, ['url' => 'https://' . substr(self::$url, 7)]));
        self::assertSame('signature', self::reason($verifier, ['url' => preg_replace('/:(\d+)\//', ':1$1/', self::$url)]));
        self::assertSame('signature', self::reason($verifier, ['key' => self::$call['headers']['idempotency-key'] . '0']));
        self::assertSame('signature', self::reason($verifier, ['key' => '']));
        $header = self::$call['headers']['x-punctual-signature'];
        // The timestamp is signed too: moving it breaks the signature.
        self::assertSame('signature', self::reason($verifier, ['header' => preg_replace('/t=(\d+)/', 't=' . (self::timestamp() + 1), $header)]));
        self::assertSame('malformed', self::reason($verifier, ['header' => null]));
        self::assertSame('malformed', self::reason($verifier, ['header' => 'v2=' . str_repeat('0', 64)]));
        self::assertSame('malformed', self::reason($verifier, ['header' => 't=' . self::timestamp()]));
        // The old format is not accepted, even with the right digest in it.
        self::assertSame('malformed', self::reason($verifier, ['header' => str_replace('v2=', 'v1=', $header)]));
    }

    public function testFailsWhenTheTimestampIsOutsideTheTolerance(): void
    {
        $secrets = [getenv('PUNCTUAL_WEBHOOK_SECRET')];
        $t = self::timestamp();
        self::assertNull(self::reason(self::verifier($secrets, $t + 300_000)));
        self::assertSame('expired', self::reason(self::verifier($secrets, $t + 300_001)));
        self::assertSame('expired', self::reason(self::verifier($secrets, $t - 300_001)));
    }

    public function testFailsWhenTheSameCallComesAgain(): void
    {
        $verifier = self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET')], self::timestamp(), true);
        self::assertNull(self::reason($verifier));
        self::assertSame('replayed', self::reason($verifier));
        // Dropping one of the two signatures does not make it a new call.
        $header = self::$call['headers']['x-punctual-signature'];
        $one = preg_replace('/,v2=[0-9a-f]+$/', '', $header);
        self::assertNotSame($header, $one);
        self::assertSame('replayed', self::reason($verifier, ['header' => $one]));
    }

    public function testTheReceiverRefusesTheRecordedCallSentAgain(): void
    {
        $send = function (string $body): int {
            $curl = curl_init(self::$url);
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
        $name = explode('/', parse_url(self::$url, PHP_URL_PATH))[2];
        self::assertSame([true, false, false], array_column(self::$receiver->requests($name), 'verified'));
        self::assertSame([null, 'replayed', 'signature'], array_column(self::$receiver->requests($name), 'reason'));
    }

    public function testAHostWithItsOwnKeyIsSignedWithThatKeyAlone(): void
    {
        self::assertTrue(self::$hostCall['verified'], 'verifyCurrentRequest with the host key: ' . self::$hostCall['reason']);
        $header = self::$hostCall['headers']['x-punctual-signature'];
        self::assertMatchesRegularExpression('/^t=\d+,v2=[0-9a-f]{64}$/', $header);
        $args = [self::$hostCall['body'], $header, 'POST', self::$hostUrl, self::$hostCall['headers']['idempotency-key']];
        $t = self::timestamp(self::$hostCall);
        self::assertTrue(self::verifier([getenv('PUNCTUAL_WEBHOOK_HOST_SECRET')], $t)->isValid(...$args));
        // The global keys do not sign calls to this host: a receiver holding them cannot forge one.
        self::assertFalse(self::verifier([getenv('PUNCTUAL_WEBHOOK_SECRET')], $t)->isValid(...$args));
        self::assertFalse(self::both($t)->isValid(...$args));
    }

    public function testTheRequestUrlIsRebuiltFromWhatPhpSees(): void
    {
        $server = ['HTTP_HOST' => '127.0.0.1:8080', 'REQUEST_URI' => '/hook/a%20b?x=1'];
        self::assertSame('http://127.0.0.1:8080/hook/a%20b?x=1', WebhookVerifier::requestUrl($server));
        self::assertSame('https://127.0.0.1:8080/hook/a%20b?x=1', WebhookVerifier::requestUrl($server + ['HTTPS' => 'on']));
        self::assertSame('http://127.0.0.1:8080/hook/a%20b?x=1', WebhookVerifier::requestUrl($server + ['HTTPS' => 'off']));
        // Behind a proxy: the public scheme and host, the path and query as they arrived.
        self::assertSame('https://shop.example/hook/a%20b?x=1', WebhookVerifier::requestUrl($server, 'https://shop.example/'));
        self::assertSame('https://shop.example/', WebhookVerifier::canonicalUrl('HTTPS://Shop.Example:443#x'));
        self::assertSame('http://shop.example/?a=B', WebhookVerifier::canonicalUrl('http://SHOP.example:80?a=B'));
        self::assertSame('http://shop.example:8443/A/b', WebhookVerifier::canonicalUrl('http://shop.example:8443/A/b#c'));
        self::assertSame('https://shop.example:80/', WebhookVerifier::canonicalUrl('https://shop.example:80/'));
        self::assertSame('https://shop.example/x', WebhookVerifier::canonicalUrl('https://shop.example/x?'));
        self::assertSame('https://shop.example/x?a?', WebhookVerifier::canonicalUrl('https://shop.example/x?a?'));
    }

    /** The stand-alone PHP snippet of docs/handlers.md and this class judge the same calls alike. */
    public function testTheReadmeSnippetAgreesWithTheVerifier(): void
    {
        $readme = (string) file_get_contents(__DIR__ . '/../../../docs/handlers.md');
        self::assertSame(1, preg_match('/And in PHP[^\n]*\n\n```php\n(.*?)```/s', $readme, $m), 'docs/handlers.md has the PHP snippet');
        if (!function_exists('punctual_verified')) {
            eval($m[1]);
        }
        $secrets = [getenv('PUNCTUAL_WEBHOOK_SECRET'), getenv('PUNCTUAL_WEBHOOK_SECRET_NEXT')];
        $cases = [
            'valid' => [],
            'body' => ['body' => self::$call['body'] . ' '],
            'method' => ['method' => 'PATCH'],
            'url' => ['url' => self::$url . '&x=1'],
            'key' => ['key' => 'punctual-0-0'],
            'moved t' => ['header' => preg_replace('/t=(\d+)/', 't=' . (self::timestamp() - 1), self::$call['headers']['x-punctual-signature'])],
            'v1' => ['header' => str_replace('v2=', 'v1=', self::$call['headers']['x-punctual-signature'])],
        ];
        $now = (int) floor(microtime(true) * 1000);
        foreach ($cases as $case => $change) {
            $headers = [
                'x-punctual-signature' => array_key_exists('header', $change) ? $change['header'] : self::$call['headers']['x-punctual-signature'],
                'idempotency-key' => $change['key'] ?? self::$call['headers']['idempotency-key'],
            ];
            $snippet = \punctual_verified($change['method'] ?? 'POST', $change['url'] ?? self::$url, $headers, $change['body'] ?? self::$call['body'], $secrets);
            self::assertSame(self::reason(self::verifier($secrets, $now), $change) === null, $snippet, $case);
            self::assertSame($case === 'valid', $snippet, $case);
        }
        self::assertFalse(\punctual_verified('POST', self::$hostUrl, self::$hostCall['headers'], self::$hostCall['body'], $secrets));
        self::assertTrue(\punctual_verified('POST', self::$hostUrl, self::$hostCall['headers'], self::$hostCall['body'], [getenv('PUNCTUAL_WEBHOOK_HOST_SECRET')]));
    }
}
