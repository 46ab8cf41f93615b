<?php

declare(strict_types=1);

namespace Punctual\Tests;

use PHPUnit\Framework\TestCase;
use Punctual\Client;

/**
 * A shop's own tests of its timed flows, on punctual's test clock: no test waits the real
 * 30 minutes. This file is the PHP example of docs/testing-your-shop.md, word for word.
 *
 * PUNCTUAL_TEST_CLOCK_URL: a punctual started with `punctual start --test-clock` (and
 * WORKER_TYPES=flash_sale) on a database of its own, which also holds the shop's tables;
 * PUNCTUAL_TEST_CLOCK_DSN: that database, for PDO; PUNCTUAL_TOKEN: its API_TOKEN, if any.
 */
final class ShopFlowsTest extends TestCase
{
    private const MINUTE = 60_000;

    private static Client $punctual;
    private static \PDO $shop;

    public static function setUpBeforeClass(): void
    {
        self::$punctual = new Client(getenv('PUNCTUAL_TEST_CLOCK_URL'), getenv('PUNCTUAL_TOKEN') ?: null);
        self::$shop = new \PDO(getenv('PUNCTUAL_TEST_CLOCK_DSN'), getenv('PUNCTUAL_DB_USER') ?: 'root', getenv('PUNCTUAL_DB_PASSWORD') ?: '', [
            \PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION,
        ]);
    }

    /** The shop's checkout: the order row, and punctual told to close it in 30 minutes. */
    private static function placeOrder(string $orderSn): void
    {
        self::$shop->prepare("INSERT INTO orders (order_sn, status, items) VALUES (?, 'unpaid', '[]')")->execute([$orderSn]);
        self::$punctual->create('close_order', ['orderSn' => $orderSn], delayMs: 30 * self::MINUTE, key: "close_order:{$orderSn}");
    }

    /** The shop's payment callback: the order paid, its close cancelled. */
    private static function pay(string $orderSn): void
    {
        self::$shop->prepare("UPDATE orders SET status = 'paid' WHERE order_sn = ?")->execute([$orderSn]);
        self::$punctual->cancelByKey("close_order:{$orderSn}");
    }

    private static function orderStatus(string $orderSn): string
    {
        $statement = self::$shop->prepare('SELECT status FROM orders WHERE order_sn = ?');
        $statement->execute([$orderSn]);
        return $statement->fetchColumn();
    }

    public function testAnUnpaidOrderIsClosedAfter30Minutes(): void
    {
        $orderSn = 'SN' . bin2hex(random_bytes(4));
        self::placeOrder($orderSn);

        self::$punctual->advance(29 * self::MINUTE);
        self::assertSame('unpaid', self::orderStatus($orderSn));
        self::assertTrue(self::$punctual->getByKey("close_order:{$orderSn}")->isPending());

        self::$punctual->advance(1 * self::MINUTE);
        self::assertSame('closed', self::orderStatus($orderSn));
        self::assertSame('done', self::$punctual->getByKey("close_order:{$orderSn}")->status);
    }

    public function testAnOrderPaidAtMinute29IsNeverClosed(): void
    {
        $orderSn = 'SN' . bin2hex(random_bytes(4));
        self::placeOrder($orderSn);

        self::$punctual->advance(29 * self::MINUTE);
        self::pay($orderSn);

        self::$punctual->advance(60 * self::MINUTE);
        self::assertSame('paid', self::orderStatus($orderSn));
        self::assertSame('cancelled', self::$punctual->getByKey("close_order:{$orderSn}")->status);
    }

    public function testAFlashSaleStartsAt10ShanghaiTime(): void
    {
        // Tomorrow by the test clock, 10:00 in Shanghai: the sale's start, read in its zone.
        $shanghai = new \DateTimeZone('Asia/Shanghai');
        $now = (new \DateTimeImmutable('@' . intdiv(self::$punctual->clock()['nowMs'], 1000)))->setTimezone($shanghai);
        $day = $now->modify('+1 day')->format('Y-m-d');
        $sale = 'sale-' . bin2hex(random_bytes(4));
        self::$punctual->create('flash_sale', ['sale' => $sale], runAt: "{$day} 10:00:00", timezone: 'Asia/Shanghai');

        self::$punctual->setTime("{$day} 09:59:59", timezone: 'Asia/Shanghai');
        self::assertSame([], self::$punctual->lease(['flash_sale']), 'not a second early');

        self::$punctual->setTime("{$day} 10:00:00", timezone: 'Asia/Shanghai');
        $started = self::$punctual->lease(['flash_sale']);
        self::assertCount(1, $started);
        self::assertSame($sale, $started[0]->payload['sale']);
        self::assertSame("{$day}T10:00:00.000+08:00", $started[0]->runAtLocal);
        self::$punctual->ack($started[0]);
    }
}
