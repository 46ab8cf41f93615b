<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Client;
use Punctual\Exception\BadRequestException;
use Punctual\Exception\NotFoundException;
use Punctual\Tests\Support\ServiceTestCase;

/** clock(), advance() and setTime() against a punctual on the test clock, and one without it. */
final class TestClockTest extends ServiceTestCase
{
    private static function testClock(): Client
    {
        return new Client(getenv('PUNCTUAL_TEST_CLOCK_URL'), getenv('PUNCTUAL_TOKEN'));
    }

    public function testReadsAndMovesTheClock(): void
    {
        $client = self::testClock();
        $before = $client->clock();
        self::assertTrue($before['testClock']);
        $moved = $client->advance(90_000);
        self::assertSame($before['nowMs'] + 90_000, $moved['nowMs']);
        self::assertTrue($moved['settled']);
        $to = $moved['nowMs'] + 3_600_000;
        $set = $client->setTime(new \DateTimeImmutable('@' . intdiv($to, 1000)));
        self::assertSame(intdiv($to, 1000) * 1000, $set['nowMs']);
    }

    public function testBadMovesAre400sThatMoveNothing(): void
    {
        $client = self::testClock();
        $now = $client->clock()['nowMs'];
        try {
            $client->setTime($now - 1);
            self::fail('a move back was accepted');
        } catch (BadRequestException $error) {
            self::assertStringContainsString('only moves forward', $error->getMessage());
        }
        self::assertSame($now, $client->clock()['nowMs']);
    }

    public function testAServiceWithoutTheTestClockAnswers404(): void
    {
        $this->expectException(NotFoundException::class);
        self::client()->clock();
    }
}
