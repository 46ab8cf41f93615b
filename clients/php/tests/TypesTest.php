<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Exception\BadRequestException;
use Punctual\Exception\NotFoundException;
use Punctual\Tests\Support\ServiceTestCase;

/** types(), setLimits(), pause() and resume() against the real service. */
final class TypesTest extends ServiceTestCase
{
    private static function typeOf(string $type): array
    {
        foreach (self::client()->types() as $entry) {
            if ($entry['type'] === $type) {
                return $entry;
            }
        }
        self::fail("GET /types does not list {$type}");
    }

    public function testSetsKeepsAndClearsLimits(): void
    {
        $client = self::client();
        $set = $client->setLimits('webhook', ['maxConcurrency' => 3, 'ratePerSecond' => 2.5, 'groupBy' => 'merchant']);
        self::assertSame(['maxConcurrency' => 3, 'ratePerSecond' => 2.5, 'groupBy' => 'merchant'], array_intersect_key($set, array_flip(['maxConcurrency', 'ratePerSecond', 'groupBy'])));

        // A key left out is kept, null clears it.
        $kept = $client->setLimits('webhook', ['ratePerSecond' => null]);
        self::assertSame(3, $kept['maxConcurrency']);
        self::assertNull($kept['ratePerSecond']);
        self::assertSame('merchant', $kept['groupBy']);

        $cleared = $client->setLimits('webhook', ['maxConcurrency' => null, 'groupBy' => null]);
        self::assertNull($cleared['maxConcurrency']);
        self::assertNull($cleared['groupBy']);
        self::assertSame($cleared['maxConcurrency'], self::typeOf('webhook')['maxConcurrency']);

        try {
            $client->setLimits('webhook', ['maxConcurrency' => 0]);
            self::fail('a limit of 0 must be a 400');
        } catch (BadRequestException $error) {
            self::assertSame(400, $error->status);
        }
        self::assertNull(self::typeOf('webhook')['maxConcurrency']);

        try {
            $client->pause('no_such_type');
            self::fail('an unknown type must be a 404');
        } catch (NotFoundException $error) {
            self::assertSame(404, $error->status);
        }

        $this->expectException(\InvalidArgumentException::class);
        $client->setLimits('webhook', []);
    }

    public function testAPausedTypeWaitsAndRunsOnResume(): void
    {
        $client = self::client();
        $paused = $client->pause('close_order');
        self::assertTrue($paused['paused']);
        try {
            $task = $client->create('close_order', ['orderSn' => self::unique('paused')], delayMs: 0)->task;
            self::waitFor(fn () => self::typeOf('close_order')['waiting'] >= 1, 10_000, 'the task to wait');
            self::assertSame('pending', $client->get($task->id)->status);
            self::assertSame(0, $client->get($task->id)->attempts);
        } finally {
            $resumed = $client->resume('close_order');
        }
        self::assertFalse($resumed['paused']);
        self::waitFor(fn () => $client->get($task->id)->status === 'done', 10_000, 'the task to run after resume');
    }
}
