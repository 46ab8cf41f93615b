<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Client;
use Punctual\Exception\BadRequestException;
use Punctual\LeasedTask;
use Punctual\Tests\Support\Receiver;
use Punctual\Tests\Support\ServiceTestCase;

/**
 * W3C trace context through the PHP client against the real service: a create's context (the
 * client's provider, or a call's own in its place) reaches the task the worker loop hands its
 * callback, in the caller's trace under a span id of the service's; a create without one hands
 * the callback none. An empty value is not sent (a recording receiver shows the headers).
 */
final class TraceContextTest extends ServiceTestCase
{
    private const TYPE = 'php_trace_job';

    /** @return array{0: string, 1: string, 2: string} a traceparent of a new trace, its trace id and span id */
    private static function caller(): array
    {
        $traceId = bin2hex(random_bytes(16));
        $spanId = bin2hex(random_bytes(8));
        return ["00-{$traceId}-{$spanId}-01", $traceId, $spanId];
    }

    /** The task the worker loop hands its callback, for the one task due. */
    private static function handOne(\Punctual\Client $client): LeasedTask
    {
        $handed = [];
        $client->work([self::TYPE], static function (LeasedTask $task) use (&$handed): void {
            $handed[] = $task;
        }, leaseMs: 10_000, waitMs: 5000, maxTasks: 1);
        self::assertCount(1, $handed);
        return $handed[0];
    }

    private static function assertInTrace(string $traceId, string $callerSpanId, ?string $traceparent): void
    {
        self::assertNotNull($traceparent, 'the leased task carries a traceparent');
        self::assertMatchesRegularExpression('/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/', $traceparent);
        [, $leasedTrace, $leasedSpan] = explode('-', $traceparent);
        self::assertSame($traceId, $leasedTrace, "the caller's trace");
        self::assertNotSame($callerSpanId, $leasedSpan, "a span of the service's, not the caller's");
    }

    public function testTheProvidersContextReachesTheWorkerLoopsCallback(): void
    {
        [$traceparent, $traceId, $spanId] = self::caller();
        $client = self::client(['traceContext' => static fn (): array => ['traceparent' => $traceparent, 'tracestate' => 'shop=checkout']]);
        $id = $client->create(self::TYPE, ['n' => 1], delayMs: 0)->task->id;
        $task = self::handOne($client);
        self::assertSame($id, $task->id);
        self::assertInTrace($traceId, $spanId, $task->traceparent);
        self::assertSame('shop=checkout', $task->tracestate);
    }

    public function testACallsOwnContextTakesThePlaceOfTheProviders(): void
    {
        [$providers] = self::caller();
        [$traceparent, $traceId, $spanId] = self::caller();
        $client = self::client(['traceContext' => static fn (): array => ['traceparent' => $providers, 'tracestate' => 'shop=provider']]);
        $answer = $client->createMany([['type' => self::TYPE, 'payload' => ['n' => 2], 'delayMs' => 0]], ['traceparent' => $traceparent]);
        self::assertSame(1, $answer['created']);
        $task = self::handOne($client);
        self::assertSame($answer['results'][0]['id'], $task->id);
        self::assertInTrace($traceId, $spanId, $task->traceparent);
        self::assertNull($task->tracestate, "the call's context is taken whole, not mixed with the provider's");
    }

    public function testACreateWithoutContextHandsTheCallbackNone(): void
    {
        // A provider with nothing to give (no active span) sends no header, not an empty one.
        $client = self::client(['traceContext' => static fn (): array => ['traceparent' => '', 'tracestate' => '']]);
        $id = $client->create(self::TYPE, ['n' => 3], delayMs: 0)->task->id;
        $task = self::handOne($client);
        self::assertSame($id, $task->id);
        self::assertNull($task->traceparent);
        self::assertNull($task->tracestate);
    }

    public function testAnEmptyValueIsNotSent(): void
    {
        $receiver = new Receiver();
        try {
            [$traceparent] = self::caller();
            // The receiver's /fail/<name> records each request and refuses it. (curl, too, leaves out
            // a header with nothing after its colon: this holds with or without the client's check.)
            $client = new Client("{$receiver->baseUrl}/fail/trace", retries: 0, traceContext: static fn (): array => ['traceparent' => '', 'tracestate' => '']);
            foreach ([
                static fn () => $client->create(self::TYPE),
                static fn () => $client->createMany([['type' => self::TYPE]], ['traceparent' => $traceparent, 'tracestate' => '']),
            ] as $call) {
                try {
                    $call();
                    self::fail('the receiver refuses every call');
                } catch (BadRequestException) {
                }
            }
            $sent = array_map(
                static fn (array $request): array => array_intersect_key($request['headers'], ['traceparent' => 1, 'tracestate' => 1]),
                $receiver->requests('trace'),
            );
            self::assertSame([[], ['traceparent' => $traceparent]], $sent);
        } finally {
            $receiver->stop();
        }
    }
}
