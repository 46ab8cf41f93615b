<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Enqueue;
use Punctual\Exception\BadRequestException;
use Punctual\Exception\InvalidTaskException;
use Punctual\Exception\KeyConflictException;
use Punctual\Exception\NotFoundException;
use Punctual\Tests\Support\ServiceTestCase;

/**
 * Enqueue::inTransaction in a shop's order transaction, with the real punctual picking the rows
 * up: a committed order's close runs (once), a rolled-back one never does, and the row reads
 * the same as the API would have written it.
 */
final class EnqueueTest extends ServiceTestCase
{
    /** Places an unpaid order for 3 of goods 1 and 2 of goods 2, and enqueues its close, in one transaction. */
    private static function placeOrder(\PDO $pdo, string $sn, array $when, bool $commit): int
    {
        $pdo->beginTransaction();
        $pdo->prepare("INSERT INTO orders (order_sn, status, items) VALUES (?, 'unpaid', ?)")
            ->execute([$sn, json_encode([['goods_id' => 1, 'num' => 3], ['goods_id' => 2, 'num' => 2]])]);
        $id = Enqueue::inTransaction($pdo, 'close_order', ['orderSn' => $sn], ...(['key' => "close_order:{$sn}"] + $when));
        $commit ? $pdo->commit() : $pdo->rollBack();
        return $id;
    }

    public function testACommittedOrderIsClosedOnceByItsTask(): void
    {
        $pdo = self::pdo();
        $client = self::client();
        $sn = self::unique('TX');
        $stockBefore = (int) self::scalar($pdo, 'SELECT stock FROM goods WHERE id = 1');
        $id = self::placeOrder($pdo, $sn, ['delayMs' => 300], true);

        self::waitFor(fn () => $client->get($id)->status === 'done', 15_000, 'the enqueued close to run');
        self::assertSame('closed', self::scalar($pdo, 'SELECT status FROM orders WHERE order_sn = ?', [$sn]));
        // The close_runs ledger gets a row for every committed run of the task: exactly one, and the stock came back once.
        self::assertSame(1, (int) self::scalar($pdo, 'SELECT COUNT(*) FROM close_runs WHERE task_id = ?', [$id]));
        self::assertSame($stockBefore + 3, (int) self::scalar($pdo, 'SELECT stock FROM goods WHERE id = 1'));
        $task = $client->getByKey("close_order:{$sn}");
        self::assertSame($id, $task->id);
        self::assertSame(1, $task->attempts);
    }

    public function testARolledBackOrderNeverGetsATask(): void
    {
        $pdo = self::pdo();
        $client = self::client();
        $sn = self::unique('RB');
        $id = self::placeOrder($pdo, $sn, ['delayMs' => 0], false);

        // A task enqueued after the rollback and seen done proves a refill came and went.
        $witness = self::unique('WIT');
        $witnessId = self::placeOrder($pdo, $witness, ['delayMs' => 0], true);
        self::assertGreaterThan($id, $witnessId);
        self::waitFor(fn () => $client->get($witnessId)->status === 'done', 15_000, 'the witness task to run');
        $refill = (int) getenv('PUNCTUAL_REFILL_INTERVAL_MS');
        usleep(2 * $refill * 1000); // and one more refill period on top

        self::assertSame(0, (int) self::scalar($pdo, 'SELECT COUNT(*) FROM punctual_tasks WHERE id = ? OR task_key = ?', [$id, "close_order:{$sn}"]));
        self::assertSame(0, (int) self::scalar($pdo, 'SELECT COUNT(*) FROM close_runs WHERE task_id = ?', [$id]));
        $this->expectException(NotFoundException::class);
        $client->getByKey("close_order:{$sn}");
    }

    /** Each runAt form: the row written here reads back as the API reads the same request. */
    public function testWritesTheInstantTheApiWould(): void
    {
        $pdo = self::pdo();
        $client = self::client();
        $forms = [
            ['runAt' => '2027-06-01T10:00:00+08:00'],
            ['runAt' => '2027-06-01T10:00:00-0500'],
            ['runAt' => '2027-06-01T10:00:00+05:30'],
            ['runAt' => '2027-06-01T02:00:00.5Z'],
            ['runAt' => '2027-06-01 10:00:00', 'timezone' => 'Asia/Shanghai'],
            ['runAt' => '2027-06-01T10:00', 'timezone' => 'asia/shanghai'],
            ['runAt' => '2027-03-14 02:30:00', 'timezone' => 'America/New_York'], // in the spring-forward gap
            ['runAt' => '2027-11-07 01:30:00', 'timezone' => 'America/New_York'], // in the fall-back overlap
            ['runAt' => '2027-06-01', 'timezone' => 'Europe/Berlin'],
            ['runAt' => 1_811_815_200_123],
            ['runAt' => 1_811_815_200_123, 'timezone' => 'Australia/Sydney'],
            ['runAt' => new \DateTimeImmutable('2027-06-01 04:00:00.456', new \DateTimeZone('Europe/Berlin'))],
        ];
        foreach ($forms as $i => $form) {
            $sn = self::unique("F{$i}-");
            $pdo->beginTransaction();
            $id = Enqueue::inTransaction($pdo, 'close_order', ['orderSn' => $sn], ...$form);
            $pdo->commit();
            $direct = $client->get($id);
            $api = $client->create('close_order', ['orderSn' => $sn], ...$form)->task;
            $label = json_encode($form);
            self::assertSame($api->runAt, $direct->runAt, $label);
            self::assertSame($api->runAtLocal, $direct->runAtLocal, $label);
            self::assertSame($api->timezone, $direct->timezone, $label);
            $client->cancel($id);
            $client->cancel($api->id);
        }
    }

    /** What the API refuses with a 400, Enqueue refuses before writing, naming the same field. */
    public function testRefusesWhatTheApiRefuses(): void
    {
        $pdo = self::pdo();
        $client = self::client();
        $deep = [];
        $cursor = &$deep;
        for ($i = 0; $i < 40; $i++) {
            $cursor['a'] = [];
            $cursor = &$cursor['a'];
        }
        unset($cursor);
        $bad = [
            'runAt' => [['runAt' => '2099-01-01T00:00:00Z'], ['runAt' => 1_700_000_000], ['runAt' => '2027-02-30 10:00:00', 'timezone' => 'UTC'], ['runAt' => '20270601'], ['runAt' => '2027-06-01T10:00:00[Asia/Shanghai]'], ['runAt' => 'tomorrow'], ['runAt' => '2027-06-01T10:00:00Z', 'delayMs' => 5], []],
            'delayMs' => [['delayMs' => -1]],
            'timezone' => [['runAt' => '2027-06-01 10:00:00', 'timezone' => 'Mars/Olympus'], ['runAt' => '2027-06-01 10:00:00', 'timezone' => '+08:00']],
            'key' => [['delayMs' => 0, 'key' => ''], ['delayMs' => 0, 'key' => str_repeat('k', 192)]],
            'maxAttempts' => [['delayMs' => 0, 'maxAttempts' => 0]],
            'misfire' => [['delayMs' => 0, 'misfire' => 'later']],
            'payload' => [['delayMs' => 0, 'payload' => ['orderSn' => 'x', 'extra' => 1]], ['delayMs' => 0, 'payload' => []], ['delayMs' => 0, 'payload' => ['orderSn' => str_repeat('x', 65)]], ['delayMs' => 0, 'payload' => ['orderSn' => 'x', 'deep' => $deep]]],
        ];
        $rowsBefore = (int) self::scalar($pdo, 'SELECT COUNT(*) FROM punctual_tasks');
        foreach ($bad as $field => $cases) {
            foreach ($cases as $case) {
                $args = $case + ['payload' => ['orderSn' => self::unique('BAD')]];
                $label = $field . ' ' . json_encode($case);
                $pdo->beginTransaction();
                try {
                    Enqueue::inTransaction($pdo, 'close_order', ...$args);
                    self::fail("Enqueue accepted {$label}");
                } catch (InvalidTaskException $error) {
                    self::assertStringStartsWith($field, $error->getMessage(), $label);
                } finally {
                    $pdo->rollBack();
                }
                try {
                    $client->create('close_order', ...$args);
                    self::fail("the API accepted {$label}");
                } catch (BadRequestException $error) {
                    self::assertStringStartsWith("body/{$field}", $error->getMessage(), $label);
                }
            }
        }
        self::assertSame($rowsBefore, (int) self::scalar($pdo, 'SELECT COUNT(*) FROM punctual_tasks'));
    }

    public function testAKeyRepeatedWithTheSameTaskAnswersItAndWithAnotherConflicts(): void
    {
        $pdo = self::pdo();
        $sn = self::unique('KEY');
        $id = self::placeOrder($pdo, $sn, ['runAt' => '2027-01-01 00:00:00', 'timezone' => 'Asia/Shanghai'], true);

        $pdo->beginTransaction();
        self::assertSame($id, Enqueue::inTransaction($pdo, 'close_order', ['orderSn' => $sn], runAt: '2026-12-31T16:00:00Z', key: "close_order:{$sn}"));
        try {
            Enqueue::inTransaction($pdo, 'close_order', ['orderSn' => $sn], runAt: '2027-01-02T00:00:00Z', key: "close_order:{$sn}");
            self::fail('a key taken by another time must be a conflict');
        } catch (KeyConflictException $conflict) {
            self::assertSame($id, $conflict->existingId);
        }
        // The transaction is still usable after the refused INSERT.
        $pdo->prepare("INSERT INTO orders (order_sn, status, items) VALUES (?, 'paid', '[]')")->execute(["{$sn}-after"]);
        $pdo->commit();
        self::assertSame('paid', self::scalar($pdo, 'SELECT status FROM orders WHERE order_sn = ?', ["{$sn}-after"]));
        self::assertSame(1, (int) self::scalar($pdo, 'SELECT COUNT(*) FROM punctual_tasks WHERE task_key = ?', ["close_order:{$sn}"]));

        // delayMs again: "the same" is the same delay after the task's creation, as in the API.
        $delayed = self::unique('DLY');
        $pdo->beginTransaction();
        $first = Enqueue::inTransaction($pdo, 'close_order', ['orderSn' => $delayed], delayMs: 3_600_000, key: "close_order:{$delayed}");
        $pdo->commit();
        $pdo->beginTransaction();
        self::assertSame($first, Enqueue::inTransaction($pdo, 'close_order', ['orderSn' => $delayed], delayMs: 3_600_000, key: "close_order:{$delayed}"));
        $pdo->commit();
        self::client()->cancel($id);
        self::client()->cancel($first);
    }

    /** A payload may nest 31 arrays or objects deep, as the table's JSON takes; 32 is refused before writing. */
    public function testNestsAPayloadAsDeepAsTheTableTakesAndNoDeeper(): void
    {
        $pdo = self::pdo();
        $nested = static function (int $levels): array {
            $value = 'bottom';
            for ($i = 1; $i < $levels; $i++) {
                $value = ['a' => $value];
            }
            return ['deep' => $value];
        };
        $pdo->beginTransaction();
        try {
            $id = Enqueue::inTransaction($pdo, 'deep_payload', $nested(31), delayMs: 3_600_000);
            self::assertSame(31, (int) self::scalar($pdo, "SELECT JSON_DEPTH(payload) - 1 FROM punctual_tasks WHERE id = {$id}"));
        } finally {
            $pdo->rollBack();
        }
        $pdo->beginTransaction();
        try {
            Enqueue::inTransaction($pdo, 'deep_payload', $nested(32), delayMs: 3_600_000);
            self::fail('Enqueue accepted a payload nested 32 deep');
        } catch (InvalidTaskException $error) {
            self::assertSame('payload must not nest more than 31 levels deep', $error->getMessage());
        } finally {
            $pdo->rollBack();
        }
    }

    public function testRefusesToWriteOutsideATransaction(): void
    {
        $this->expectException(\LogicException::class);
        Enqueue::inTransaction(self::pdo(), 'close_order', ['orderSn' => 'no-tx'], delayMs: 0);
    }
}
