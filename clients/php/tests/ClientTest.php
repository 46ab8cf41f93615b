<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Client;
use Punctual\Exception\BadRequestException;
use Punctual\Exception\ConflictException;
use Punctual\Exception\ConnectionException;
use Punctual\Exception\ForbiddenException;
use Punctual\Exception\NotFoundException;
use Punctual\Exception\PayloadTooLargeException;
use Punctual\Exception\ServiceUnavailableException;
use Punctual\Exception\UnauthorizedException;
use Punctual\Task;
use Punctual\Tests\Support\Receiver;
use Punctual\Tests\Support\ServiceTestCase;

/** Every call of Punctual\Client against the real service. */
final class ClientTest extends ServiceTestCase
{
    private static Receiver $receiver;

    public static function setUpBeforeClass(): void
    {
        self::$receiver = new Receiver();
    }

    public static function tearDownAfterClass(): void
    {
        self::$receiver->stop();
    }

    public function testCreatesWithEveryFormOfRunAt(): void
    {
        $client = self::client();
        $sn = self::unique('SN');

        $offset = $client->create('close_order', ['orderSn' => "{$sn}a"], runAt: '2027-06-01T10:00:00+08:00');
        self::assertTrue($offset->created);
        self::assertSame('2027-06-01T02:00:00.000Z', $offset->task->runAt);

        $naive = $client->create('close_order', ['orderSn' => "{$sn}b"], runAt: '2027-06-01 10:00:00', timezone: 'Asia/Shanghai');
        self::assertSame('2027-06-01T02:00:00.000Z', $naive->task->runAt);
        self::assertSame('2027-06-01T10:00:00.000+08:00', $naive->task->runAtLocal);
        self::assertSame('Asia/Shanghai', $naive->task->timezone);

        $epoch = $client->create('close_order', ['orderSn' => "{$sn}c"], runAt: 1_811_815_200_123);
        self::assertSame('2027-06-01T02:00:00.123Z', $epoch->task->runAt);

        $dateTime = new \DateTimeImmutable('2027-06-01 04:00:00.456', new \DateTimeZone('Europe/Berlin'));
        $fromObject = $client->create('close_order', ['orderSn' => "{$sn}d"], runAt: $dateTime);
        self::assertSame('2027-06-01T02:00:00.456Z', $fromObject->task->runAt);
        self::assertEquals($dateTime, $fromObject->task->runAt());

        $before = (int) floor(microtime(true) * 1000);
        $delayed = $client->create('close_order', ['orderSn' => "{$sn}e"], delayMs: 3_600_000);
        $runAt = $delayed->task->runAt()->format('Uv');
        self::assertGreaterThanOrEqual($before + 3_600_000, (int) $runAt);
        self::assertLessThan($before + 3_600_000 + 60_000, (int) $runAt);
    }

    public function testCreatesWithKeyMisfireAttemptsAndCron(): void
    {
        $client = self::client();
        $key = self::unique('close_order:');
        $options = ['type' => 'close_order', 'payload' => ['orderSn' => $key], 'runAt' => '2027-01-01T00:00:00Z', 'key' => $key, 'misfire' => 'skip', 'maxAttempts' => 7];
        $first = $client->create(...$options);
        self::assertTrue($first->created);
        self::assertSame($key, $first->task->key);
        self::assertSame('skip', $first->task->misfire);
        self::assertSame(7, $first->task->maxAttempts);

        // The same create again (a retry after a timeout, say): the same task, not a second one.
        $again = $client->create(...$options);
        self::assertFalse($again->created);
        self::assertSame($first->task->id, $again->task->id);

        // The key with other content: a 409 carrying the server's message and the task as it is.
        try {
            $client->create(...['payload' => ['orderSn' => 'other']] + $options);
            self::fail('a key taken by other content must be a conflict');
        } catch (ConflictException $conflict) {
            self::assertSame(409, $conflict->status);
            self::assertSame('PUNCTUAL_CONFLICT', $conflict->errorCode);
            self::assertStringContainsString("already names task {$first->task->id}", $conflict->getMessage());
            self::assertInstanceOf(Task::class, $conflict->task);
            self::assertSame($first->task->id, $conflict->task->id);
        }

        $cronKey = self::unique('members:reset:');
        $recurring = $client->create('webhook', ['url' => self::$receiver->baseUrl . '/hook/never'], cron: '0 0 * * *', timezone: 'Asia/Shanghai', key: $cronKey);
        self::assertSame('0 0 * * *', $recurring->task->cron);
        self::assertStringEndsWith('T00:00:00.000+08:00', $recurring->task->runAtLocal);
        self::assertSame('cancelled', $client->cancelByKey($cronKey)->status);
    }

    public function testCreatesWithPriorityReplaceExpiryAndSpread(): void
    {
        $client = self::client();
        $key = self::unique('flow:');
        $first = $client->create('close_order', ['orderSn' => $key], runAt: '2027-01-01T00:00:00Z', key: $key, priority: 5, expireAfterMs: 600000, spreadMs: 30000, group: 'merchant:42');
        self::assertTrue($first->created);
        self::assertSame(5, $first->task->priority);
        self::assertSame(600000, $first->task->expireAfterMs);
        self::assertSame('merchant:42', $first->task->group);
        $offset = strtotime(substr($first->task->runAt, 0, 19) . 'Z') - strtotime('2027-01-01T00:00:00Z');
        self::assertGreaterThanOrEqual(0, $offset);
        self::assertLessThan(30, $offset);
        self::assertFalse($first->task->isExpired());

        // Other content under the key, with replace: the pending task takes it (not created, same id).
        $replaced = $client->create('close_order', ['orderSn' => $key . '-new'], runAt: '2027-01-02T00:00:00Z', key: $key, onKeyConflict: 'replace', maxDelayMs: 3600000);
        self::assertFalse($replaced->created);
        self::assertSame($first->task->id, $replaced->task->id);
        self::assertSame(['orderSn' => $key . '-new'], $replaced->task->payload);
        // Held to its first runAt + maxDelayMs.
        $ceiling = (new \DateTimeImmutable($first->task->runAt))->modify('+1 hour')->format('Y-m-d\\TH:i:s.v\\Z');
        self::assertSame($ceiling, $replaced->task->runAt);
        self::assertSame('cancelled', $client->cancelByKey($key)->status);
    }

    public function testReadsCancelsAndReschedulesByIdAndByKey(): void
    {
        $client = self::client();
        // A key that needs encoding in a URL.
        $key = self::unique('close_order:SN/1 ä?#');
        $task = $client->create('close_order', ['orderSn' => 'X1'], delayMs: 3_600_000, key: $key)->task;

        self::assertSame($task->id, $client->get($task->id)->id);
        self::assertSame($task->id, $client->getByKey($key)->id);

        $moved = $client->reschedule($task->id, runAt: '2026-12-24 20:00:00', timezone: 'Europe/Berlin');
        self::assertSame('2026-12-24T20:00:00.000+01:00', $moved->runAtLocal);
        self::assertSame('Europe/Berlin', $moved->timezone);
        $before = time();
        $later = $client->reschedule($task->id, delayMs: 7_200_000);
        self::assertGreaterThanOrEqual($before + 7200, (int) $later->runAt()->format('U'));
        self::assertLessThan($before + 7200 + 60, (int) $later->runAt()->format('U'));

        self::assertSame('cancelled', $client->cancelByKey($key)->status);
        try {
            $client->cancel($task->id);
            self::fail('cancelling a cancelled task must be a conflict');
        } catch (ConflictException $conflict) {
            self::assertSame('cancelled', $conflict->task?->status);
            self::assertStringContainsString('only a pending task can be cancelled', $conflict->getMessage());
        }
        try {
            $client->reschedule($task->id, delayMs: 1000);
            self::fail('rescheduling a cancelled task must be a conflict');
        } catch (ConflictException $conflict) {
            self::assertStringContainsString('only a pending task can be rescheduled', $conflict->getMessage());
        }

        $other = $client->create('close_order', ['orderSn' => 'X2'], delayMs: 3_600_000)->task;
        self::assertSame('cancelled', $client->cancel($other->id)->status);
        $cancelledIds = array_map(static fn (Task $t) => $t->id, $client->recent('cancelled', 200));
        self::assertContains($other->id, $cancelledIds);
        self::assertContains($task->id, $cancelledIds);

        foreach ([fn () => $client->get(999_999_999), fn () => $client->getByKey('no such key'), fn () => $client->cancelByKey('no such key')] as $call) {
            try {
                $call();
                self::fail('a missing task must be a 404');
            } catch (NotFoundException $missing) {
                self::assertSame(404, $missing->status);
                self::assertSame('PUNCTUAL_NOT_FOUND', $missing->errorCode);
                self::assertStringContainsString('does not exist', $missing->getMessage());
            }
        }
    }

    public function testRetriesAFailedTask(): void
    {
        $client = self::client();
        $name = self::unique('fail');
        $task = $client->create('webhook', ['url' => self::$receiver->baseUrl . "/fail/{$name}"], delayMs: 0, maxAttempts: 1)->task;
        $failed = self::waitFor(fn () => ($now = $client->get($task->id))->status === 'failed' ? $now : null, 15_000, 'the webhook task to fail');
        self::assertStringContainsString('answered 400', (string) $failed->lastError);

        $retried = $client->retry($task->id, delayMs: 3_600_000);
        self::assertSame('pending', $retried->status);
        self::assertSame(0, $retried->attempts);
        try {
            $client->retry($task->id);
            self::fail('retrying a pending task must be a conflict');
        } catch (ConflictException $conflict) {
            self::assertStringContainsString('only a failed task can be retried', $conflict->getMessage());
        }
        $client->cancel($task->id);

        // Retry with no time: now. The receiver refuses again, so it fails again: two calls in all.
        $again = $client->create('webhook', ['url' => self::$receiver->baseUrl . "/fail/{$name}b"], delayMs: 0, maxAttempts: 1)->task;
        self::waitFor(fn () => $client->get($again->id)->status === 'failed', 15_000, 'the second webhook task to fail');
        self::assertSame('pending', $client->retry($again->id)->status);
        self::waitFor(fn () => count(self::$receiver->requests("{$name}b")) === 2 && $client->get($again->id)->status === 'failed', 15_000, 'the retried call');
    }

    public function testCreatesManyAndChangesThemInBulkByTag(): void
    {
        $client = self::client();
        $tag = 'sale:' . self::unique('T');
        $key = 'batch:' . self::unique('K');
        $answer = $client->createMany([
            ['type' => 'close_order', 'payload' => ['orderSn' => self::unique('B')], 'delayMs' => 3_600_000, 'key' => $key, 'tags' => [$tag]],
            ['type' => 'close_order', 'payload' => ['orderSn' => self::unique('B')], 'runAt' => new \DateTimeImmutable('+2 hours'), 'tags' => [$tag]],
            ['type' => 'no_such_handler', 'payload' => []],
        ]);
        self::assertSame([201, 201, 400], array_column($answer['results'], 'status'));
        self::assertSame(2, $answer['created']);
        self::assertSame(1, $answer['refused']);
        self::assertStringContainsString('type', $answer['results'][2]['message']);
        self::assertSame('pending', $client->getByKey($key)->status);

        $moved = $client->bulkReschedule(['tag' => $tag, 'shiftMs' => 60_000, 'requestId' => self::unique('R')]);
        self::assertSame(['matched' => 2, 'changed' => 2], $moved);
        self::assertSame(['matched' => 2, 'changed' => 2], $client->bulkCancel(['tag' => $tag]));
        self::assertSame(['matched' => 0, 'changed' => 0], $client->bulkCancel(['tag' => $tag]));
        self::assertSame('cancelled', $client->getByKey($key)->status);
    }

    public function testListsCountsAndRetriesInBulk(): void
    {
        $client = self::client();
        $tag = 'list:' . self::unique('L');
        $client->createMany(array_map(
            fn (int $i) => ['type' => 'close_order', 'payload' => ['orderSn' => self::unique('L')], 'delayMs' => 3_600_000 + $i, 'tags' => [$tag]],
            [0, 1, 2],
        ));
        $first = $client->listTasks(['tag' => $tag, 'limit' => 2]);
        self::assertCount(2, $first['tasks']);
        self::assertSame(3, $first['total']);
        self::assertSame(2, $first['nextOffset']);
        $rest = $client->listTasks(['tag' => $tag, 'limit' => 2, 'offset' => $first['nextOffset']]);
        self::assertCount(1, $rest['tasks']);
        self::assertNull($rest['nextOffset']);
        self::assertSame('pending', $rest['tasks'][0]->status);
        self::assertSame(3, $client->counts(['tag' => $tag])['counts']['pending']);

        // Two webhooks that fail for good, retried together by their tag: each is called once more.
        $failing = 'retry:' . self::unique('R');
        $names = [self::unique('bulk'), self::unique('bulk')];
        $made = $client->createMany(array_map(
            fn (string $name) => ['type' => 'webhook', 'payload' => ['url' => self::$receiver->baseUrl . "/fail/{$name}"], 'delayMs' => 0, 'maxAttempts' => 1, 'tags' => [$failing]],
            $names,
        ));
        $ids = array_column($made['results'], 'id');
        self::waitFor(fn () => array_filter($ids, fn (int $id) => $client->get($id)->status !== 'failed') === [], 15_000, 'the webhooks to fail');
        self::assertSame(['matched' => 2, 'changed' => 2], $client->bulkRetry(['tag' => $failing]));
        self::waitFor(fn () => array_filter($names, fn (string $name) => count(self::$receiver->requests($name)) !== 2) === [], 15_000, 'the retried calls');
        self::assertSame(2, $client->bulkRetry(['tag' => $failing])['matched'], 'failed again, they can be retried again');
    }

    public function testEditsDeletesAndReadsWhatAHandlerAnswered(): void
    {
        $client = self::client();
        // No such order in the shop's table: close_order answers so, and the task keeps it.
        $answered = $client->create('close_order', ['orderSn' => self::unique('NONE')], delayMs: 0)->task;
        $done = self::waitFor(fn () => ($now = $client->get($answered->id))->status === 'done' ? $now : null, 15_000, 'the close to run');
        self::assertSame('no such order', $done->lastResult);
        self::assertSame('no such order', $client->runs($answered->id)['runs'][0]['result']);

        $pending = $client->create('close_order', ['orderSn' => self::unique('OLD')], delayMs: 3_600_000)->task;
        $edited = $client->editPayload($pending->id, ['orderSn' => 'EDITED']);
        self::assertSame(['orderSn' => 'EDITED'], $edited->payload);
        $gone = $client->delete($pending->id);
        self::assertSame($pending->id, $gone->id);
        self::assertSame(['matched' => 0, 'changed' => 0], $client->bulkDelete(['ids' => [$pending->id], 'status' => 'failed']));
        self::assertGreaterThanOrEqual(1, $client->lastHour()['done']);
    }

    public function testIteratesPendingTasksPageByPage(): void
    {
        $client = self::client();
        $type = 'close_order';
        $before = iterator_to_array($client->allPending($type), false);
        $made = [];
        for ($i = 0; $i < 7; $i++) {
            $made[] = $client->create($type, ['orderSn' => self::unique('P')], delayMs: 600_000 + $i)->task->id;
        }

        $pages = iterator_to_array($client->pendingPages($type, 3), false);
        $ids = [];
        $previous = '';
        foreach ($pages as $page) {
            self::assertLessThanOrEqual(3, count($page));
            foreach ($page as $task) {
                self::assertSame('pending', $task->status);
                // Soonest first, then by id.
                $order = $task->runAt . sprintf('%020d', $task->id);
                self::assertGreaterThan($previous, $order);
                $previous = $order;
                $ids[] = $task->id;
            }
        }
        self::assertCount(count($before) + 7, $ids);
        self::assertSame($ids, array_values(array_unique($ids)));
        foreach ($made as $id) {
            self::assertContains($id, $ids);
        }
        self::assertSame($ids, array_map(static fn (Task $t) => $t->id, iterator_to_array($client->allPending($type, 4), false)));

        $page = $client->pending($type, 2);
        self::assertCount(2, $page['tasks']);
        self::assertNotNull($page['nextCursor']);
        $next = $client->pending($type, 2, $page['nextCursor']);
        self::assertSame(array_slice($ids, 2, 2), array_map(static fn (Task $t) => $t->id, $next['tasks']));
    }

    public function testReadsSummaryProbesAndMetrics(): void
    {
        $client = self::client();
        $summary = $client->summary();
        foreach (['pending', 'running', 'failed', 'armed', 'latenessP50Ms', 'latenessP99Ms', 'countedAt'] as $field) {
            self::assertArrayHasKey($field, $summary);
        }
        self::assertTrue($client->healthy());
        self::assertTrue($client->ready());
        self::assertStringContainsString('punctual_armed_timers', $client->metrics());
        self::assertSame('admin', $client->role()); // API_TOKEN holds every role
        $cluster = $client->cluster();
        foreach (['sharding', 'self', 'leaseMs', 'shards', 'unowned', 'members'] as $field) {
            self::assertArrayHasKey($field, $cluster);
        }
        self::assertSame(256, $cluster['shards']);
    }

    public function testTurnsEveryErrorStatusIntoItsException(): void
    {
        $client = self::client();
        try {
            $client->create('close_order', ['orderSn' => 'far'], runAt: '2099-01-01T00:00:00Z');
            self::fail('ten years ahead must be a 400');
        } catch (BadRequestException $error) {
            self::assertSame(400, $error->status);
            self::assertSame('PUNCTUAL_BAD_REQUEST', $error->errorCode);
            self::assertSame('body/runAt must not be more than 10 years ahead', $error->getMessage());
        }

        $anonymous = new Client(getenv('PUNCTUAL_URL'));
        try {
            $anonymous->summary();
            self::fail('no token must be a 401');
        } catch (UnauthorizedException $error) {
            self::assertSame('PUNCTUAL_UNAUTHORIZED', $error->errorCode);
            self::assertStringContainsString('bearer token', $error->getMessage());
        }
        // The probes need no token.
        self::assertTrue($anonymous->healthy());

        try {
            $client->create('close_order', ['orderSn' => str_repeat('x', 200 * 1024)], delayMs: 0);
            self::fail('a 200 KiB body must be a 413');
        } catch (PayloadTooLargeException $error) {
            self::assertSame(413, $error->status);
            self::assertNotSame('', $error->getMessage());
        }

        // punctual itself never answers 403; a gateway in front of it may.
        $gated = new Client(self::$receiver->baseUrl . '/gateway', getenv('PUNCTUAL_TOKEN'));
        try {
            $gated->get(1);
            self::fail('the gateway must refuse');
        } catch (ForbiddenException $error) {
            self::assertSame('GATEWAY_FORBIDDEN', $error->errorCode);
            self::assertSame('the gateway does not let this client through', $error->getMessage());
        }

        // A punctual whose database is gone: up, but every create is a 503 to be sent again.
        $down = new Client(getenv('PUNCTUAL_DOWN_URL'), getenv('PUNCTUAL_TOKEN'));
        try {
            $down->create('close_order', ['orderSn' => 'during'], delayMs: 0, key: self::unique('outage:'));
            self::fail('a create without a database must be a 503');
        } catch (ServiceUnavailableException $error) {
            self::assertSame('PUNCTUAL_DATABASE_UNAVAILABLE', $error->errorCode);
            self::assertStringContainsString('the database is unavailable', $error->getMessage());
        }
        self::assertFalse($down->ready());
        self::assertTrue($down->healthy());
    }

    public function testRetriesEveryCallThatNeverReachedTheService(): void
    {
        // A port nobody listens on: the calls certainly did not arrive, so any of them may be sent again.
        $socket = stream_socket_server('tcp://127.0.0.1:0');
        $closed = 'http://' . stream_socket_get_name($socket, false);
        fclose($socket);
        foreach (['get' => fn (Client $c) => $c->get(1), 'cancel' => fn (Client $c) => $c->cancel(1)] as $what => $call) {
            $retries = [];
            $client = new Client($closed, 'token', retries: 2, retryDelayMs: 10, onRetry: function (int $attempt) use (&$retries) {
                $retries[] = $attempt;
            });
            try {
                $call($client);
                self::fail("{$what} against a closed port must fail");
            } catch (ConnectionException $error) {
                self::assertSame(CURLE_COULDNT_CONNECT, $error->curlErrno, $what);
                self::assertSame(3, $error->attempts, $what);
                self::assertSame([1, 2], $retries, $what);
            }
        }
    }

    public function testSendsAKeyedCreateAgainAfterATimeoutAndMakesOneTask(): void
    {
        $pdo = self::pdo();
        $name = self::unique('slow');
        $key = self::unique('close_order:slow');
        $retries = [];
        $client = new Client(self::$receiver->baseUrl . "/slow/{$name}", getenv('PUNCTUAL_TOKEN'), timeoutMs: 700, retryDelayMs: 50, onRetry: function (int $attempt, ConnectionException $error) use (&$retries) {
            $retries[] = $error->isTimeout();
        });
        // The first send reaches punctual and makes the task, but its answer comes too late.
        $created = $client->create('close_order', ['orderSn' => $key], runAt: '2027-03-01T00:00:00Z', key: $key);
        self::assertSame([true], $retries);
        self::assertFalse($created->created, 'the second send finds the task the first one made');
        self::assertSame(1, (int) self::scalar($pdo, 'SELECT COUNT(*) FROM punctual_tasks WHERE task_key = ?', [$key]));
        self::assertSame([201, 200], array_column(self::$receiver->requests($name), 'forwardedStatus'));
    }

    public function testDoesNotSendACreateWithoutKeyTwice(): void
    {
        $pdo = self::pdo();
        $name = self::unique('slow');
        $sn = self::unique('nokey');
        $retries = 0;
        $client = new Client(self::$receiver->baseUrl . "/slow/{$name}", getenv('PUNCTUAL_TOKEN'), timeoutMs: 700, retryDelayMs: 50, onRetry: function () use (&$retries) {
            $retries++;
        });
        try {
            $client->create('close_order', ['orderSn' => $sn], runAt: '2027-03-01T00:00:00Z');
            self::fail('the timeout must reach the caller');
        } catch (ConnectionException $error) {
            self::assertTrue($error->isTimeout());
            self::assertSame(1, $error->attempts);
        }
        self::assertSame(0, $retries);
        self::assertSame(1, (int) self::scalar($pdo, "SELECT COUNT(*) FROM punctual_tasks WHERE JSON_UNQUOTE(JSON_EXTRACT(payload, '$.orderSn')) = ?", [$sn]));
        self::assertCount(1, self::$receiver->requests($name));
    }
}
