<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Client;
use Punctual\Created;
use Punctual\Exception\ApiException;
use Punctual\Exception\BadRequestException;
use Punctual\Exception\ConflictException;
use Punctual\Exception\ForbiddenException;
use Punctual\Exception\NotFoundException;
use Punctual\Exception\PayloadTooLargeException;
use Punctual\Exception\ServiceUnavailableException;
use Punctual\Exception\UnauthorizedException;
use Punctual\LeasedTask;
use Punctual\PermanentFailure;
use Punctual\Task;
use Punctual\Tests\Support\CaseRun;
use Punctual\Tests\Support\ServiceTestCase;
use Punctual\WebhookVerifier;

/**
 * The conformance cases (clients/conformance/cases.json) through the PHP client, one test per
 * case, against the real service `npm run test:php` started, as the TypeScript, Python and Go
 * clients run them. Each call goes through the client's own API; an error's kind is its
 * exception class.
 */
final class ConformanceTest extends ServiceTestCase
{
    private const KINDS = [
        BadRequestException::class => 'bad_request',
        UnauthorizedException::class => 'unauthorized',
        ForbiddenException::class => 'forbidden',
        NotFoundException::class => 'not_found',
        ConflictException::class => 'conflict',
        PayloadTooLargeException::class => 'payload_too_large',
        ServiceUnavailableException::class => 'unavailable',
    ];

    private static ?string $run = null;

    /** @return array<string, array<string, mixed>> each case by its name */
    private static function read(): array
    {
        $file = getenv('PUNCTUAL_CONFORMANCE_CASES') ?: __DIR__ . '/../../conformance/cases.json';
        $cases = [];
        foreach (json_decode((string) file_get_contents($file), true, 512, JSON_THROW_ON_ERROR)['cases'] as $case) {
            $cases[$case['name']] = $case;
        }
        return $cases;
    }

    /** @return array<string, array{0: string}> the cases' names (PHPUnit prints a data set in full) */
    public static function cases(): array
    {
        return array_map(static fn (array $case) => [$case['name']], self::read());
    }

    /** @dataProvider cases */
    public function testCase(string $name): void
    {
        $case = self::read()[$name];
        if (isset($case['skip']['php'])) {
            self::markTestSkipped($case['skip']['php']);
        }
        self::$run ??= self::unique('php-');
        $client = self::client();
        $run = new CaseRun(
            $case,
            ['run' => self::$run, 'receiver' => (string) getenv('PUNCTUAL_RECEIVER_URL'), 'secret' => (string) getenv('PUNCTUAL_WEBHOOK_SECRET')],
            fn (string $call, array $args): mixed => self::view(self::call($client, $call, $args)),
            static fn (\Throwable $error): ?array => self::errorView($error),
        );
        $run->run();
        $this->addToAssertionCount(count($case['steps']));
    }

    private static function call(Client $client, string $call, array $args): mixed
    {
        return match ($call) {
            'create' => $client->create(...$args['task'], traceContext: $args['traceContext'] ?? null),
            'createMany' => $client->createMany($args['tasks'], $args['traceContext'] ?? null),
            'get' => $client->get($args['id']),
            'getByKey' => $client->getByKey($args['key']),
            'cancelByKey' => $client->cancelByKey($args['key']),
            'pending' => $client->pending($args['type'] ?? null, $args['limit'] ?? null, $args['cursor'] ?? null),
            'allPending' => ['tasks' => iterator_to_array($client->allPending($args['type'] ?? null, $args['pageSize'] ?? 500), false)],
            'lease' => ['tasks' => $client->lease($args['types'], $args['max'] ?? 1, $args['leaseMs'] ?? 30_000, $args['waitMs'] ?? 0)],
            'extend' => $client->extend(LeasedTask::fromArray($args['task']), $args['leaseMs']),
            'ack' => $client->ack(LeasedTask::fromArray($args['task'])),
            'nack' => $client->nack(LeasedTask::fromArray($args['task']), $args['error'], null, $args['permanent'] ?? false),
            'work' => self::work($client, $args),
            'verifyWebhook' => [
                'valid' => (new WebhookVerifier($args['secrets']))->isValid($args['body'], $args['signature'], $args['method'], $args['url'], $args['idempotencyKey']),
            ],
            default => throw new \LogicException("the PHP runner has no call {$call}"),
        };
    }

    /** The worker loop for the case `work`: handles `tasks` runs as the case file says, then stops (maxTasks). */
    private static function work(Client $client, array $args): array
    {
        $handled = [];
        $client->work($args['types'], static function (LeasedTask $task) use (&$handled): void {
            $handled[] = [
                'id' => $task->id,
                'attempt' => $task->attempt,
                'idempotencyKey' => $task->idempotencyKey,
                'traceparent' => $task->traceparent,
                'tracestate' => $task->tracestate,
            ];
            $do = $task->payload['do'] ?? 'ok';
            if ($do === 'fail-once' && $task->attempt === 1) {
                throw new \RuntimeException($task->payload['message']);
            }
            if ($do === 'permanent') {
                throw new PermanentFailure($task->payload['message']);
            }
        }, $args['leaseMs'], $args['waitMs'], $args['tasks']);
        return ['handled' => $handled];
    }

    /** The client's objects as JSON-like arrays: their public properties are the API's field names. */
    private static function view(mixed $value): mixed
    {
        if ($value instanceof Task || $value instanceof LeasedTask || $value instanceof Created) {
            return self::view(get_object_vars($value));
        }
        return is_array($value) ? array_map([self::class, 'view'], $value) : $value;
    }

    private static function errorView(\Throwable $error): ?array
    {
        if (!$error instanceof ApiException) {
            return null;
        }
        $view = ['kind' => self::KINDS[$error::class] ?? 'api', 'status' => $error->status, 'code' => $error->errorCode, 'message' => $error->getMessage()];
        if ($error instanceof ConflictException && $error->task !== null) {
            $view['task'] = self::view($error->task);
        }
        return $view;
    }
}
