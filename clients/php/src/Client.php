<?php

declare(strict_types=1);

namespace Punctual;

use Punctual\Exception\ApiException;
use Punctual\Exception\ConnectionException;

/**
 * punctual's HTTP API for a PHP shop: one method per route, the same set the TypeScript client
 * has (a test compares both with the OpenAPI document).
 *
 * What it decides:
 * - An error status becomes a typed exception carrying the server's message and code
 *   (BadRequestException, UnauthorizedException, ForbiddenException, NotFoundException,
 *   ConflictException with the task as it is now, PayloadTooLargeException,
 *   ServiceUnavailableException); no answer at all becomes a ConnectionException.
 * - Retries on connection errors, with a short doubling pause. A call that certainly never
 *   reached punctual (no connection could be made) is always retried. A call that may have
 *   reached it (timeout, connection reset mid-answer) is retried only when sending it twice does
 *   no harm: a read, or a create with a `key` (the server answers the second one with the task the
 *   first made). Cancel, reschedule and retry are not sent twice behind the shop's back.
 * - One curl handle per client, so consecutive calls reuse the connection (keep-alive).
 */
final class Client
{
    /** curl errors after which the request certainly did not reach the server. */
    private const NOT_SENT = [CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT];

    private readonly string $baseUrl;
    private ?\CurlHandle $curl = null;
    /** @var null|callable(int $attempt, ConnectionException $error): void */
    private $onRetry;
    /** @var null|callable(): (array{traceparent?: ?string, tracestate?: ?string}|null) */
    private $traceContext;

    /**
     * @param string $baseUrl where punctual listens, e.g. http://127.0.0.1:3000
     * @param string|null $token API_TOKEN, when the service has one
     * @param int $timeoutMs give up on one attempt after this long (connect + answer)
     * @param int $connectTimeoutMs give up connecting after this long
     * @param int $retries extra attempts after a connection error, for the calls that allow it
     * @param int $retryDelayMs pause before the first retry; doubles for each next one
     * @param callable|null $onRetry called before each retry with the attempt number that failed and its error (for the shop's log)
     * @param callable|null $traceContext answers the caller's W3C trace context for each create and
     *   createMany (`['traceparent' => …, 'tracestate' => …]`, or null), sent as headers so the task's
     *   runs join the caller's trace; with OpenTelemetry: `function (): array { $headers = [];
     *   TraceContextPropagator::getInstance()->inject($headers); return $headers; }`
     */
    public function __construct(
        string $baseUrl,
        private readonly ?string $token = null,
        private readonly int $timeoutMs = 10_000,
        private readonly int $connectTimeoutMs = 3_000,
        private readonly int $retries = 2,
        private readonly int $retryDelayMs = 200,
        ?callable $onRetry = null,
        ?callable $traceContext = null,
    ) {
        $this->baseUrl = rtrim($baseUrl, '/');
        $this->onRetry = $onRetry;
        $this->traceContext = $traceContext;
    }

    /**
     * Schedules a task. Give exactly one of `runAt` and `delayMs` (or neither, with `cron`: the
     * first occurrence is then the next match). `runAt` is an ISO-8601 string with an offset
     * ("2026-12-01T10:00:00+08:00"), a naive local time ("2026-12-01 10:00:00", read in
     * `timezone`, else the service's TIMEZONE), an integer of epoch milliseconds, or a
     * DateTimeInterface. `created` in the answer is false when `key` named an existing task with
     * the same content; a key taken by other content throws a ConflictException, unless
     * `onKeyConflict` is "replace": then a pending task under the key takes the new payload and
     * runAt (`created` false, the task as it now is), and `maxDelayMs` caps how far repeated
     * replaces push it past its first runAt. `priority` (-10 to 10) orders tasks due together,
     * `expireAfterMs` skips a task that could not start that long after its runAt, and `spreadMs`
     * runs it at runAt + hash(key) mod spreadMs. `traceContext` (`['traceparent' => …,
     * 'tracestate' => …]`) is this create's W3C trace context, in place of the client's.
     */
    public function create(
        string $type,
        array $payload = [],
        int|string|\DateTimeInterface|null $runAt = null,
        ?int $delayMs = null,
        ?string $timezone = null,
        ?string $key = null,
        ?int $maxAttempts = null,
        ?string $misfire = null,
        ?string $cron = null,
        ?int $priority = null,
        ?string $onKeyConflict = null,
        ?int $maxDelayMs = null,
        ?int $expireAfterMs = null,
        ?int $spreadMs = null,
        ?string $group = null,
        ?array $traceContext = null,
    ): Created {
        $body = self::withoutNulls([
            'type' => $type,
            // An empty PHP array would go out as [], which is not an object.
            'payload' => $payload === [] ? new \stdClass() : $payload,
            'runAt' => self::runAtValue($runAt),
            'delayMs' => $delayMs,
            'timezone' => $timezone,
            'key' => $key,
            'maxAttempts' => $maxAttempts,
            'misfire' => $misfire,
            'cron' => $cron,
            'priority' => $priority,
            'onKeyConflict' => $onKeyConflict,
            'maxDelayMs' => $maxDelayMs,
            'expireAfterMs' => $expireAfterMs,
            'spreadMs' => $spreadMs,
            'group' => $group,
        ]);
        // With a key, a second send finds the task the first one made: safe to repeat.
        [$status, $task] = $this->call('POST', '/tasks', $body, $key !== null, headers: $this->traceHeaders($traceContext));
        return new Created(Task::fromArray($task), $status === 201);
    }

    /**
     * Schedules up to 1,000 tasks in one request (`POST /tasks/batch`). Each item is an array of
     * the fields `create` takes (`type`, `payload`, `runAt` or `delayMs`, `timezone`, `key`, `tags`…)
     * and is answered as a single create would be, in order: `results` holds one
     * `{status, id, key[, code, message]}` per item (201, 200, 409 or 400), and `created`,
     * `repeated` and `refused` count them. A bad item does not refuse the others. `traceContext`
     * is the request's W3C trace context, in place of the client's (as for `create`).
     */
    public function createMany(array $tasks, ?array $traceContext = null): array
    {
        $items = array_map(static function (array $task): array {
            if (array_key_exists('runAt', $task)) {
                $task['runAt'] = self::runAtValue($task['runAt']);
            }
            if (($task['payload'] ?? null) === []) {
                $task['payload'] = new \stdClass();
            }
            return self::withoutNulls($task);
        }, array_values($tasks));
        // A repeat is answered 200 per item when every item has a key; without keys it is not safe.
        $keyed = $items !== [] && count(array_filter($items, static fn (array $t) => isset($t['key']))) === count($items);
        return $this->call('POST', '/tasks/batch', ['tasks' => $items], $keyed, headers: $this->traceHeaders($traceContext))[1];
    }

    /**
     * Cancels every pending task selected by exactly one of `tag`, `keyPrefix` or `type` (admin
     * role). Answers `{matched, changed}`; repeating it is harmless.
     */
    public function bulkCancel(array $selector): array
    {
        return $this->call('POST', '/tasks/bulk/cancel', $selector, true)[1];
    }

    /**
     * Runs again now every failed task selected by exactly one of `tag`, `keyPrefix`, `type` or
     * `ids` (admin role), its attempts reset. Answers `{matched, changed}`; repeating it is harmless.
     */
    public function bulkRetry(array $selector): array
    {
        return $this->call('POST', '/tasks/bulk/retry', $selector, true)[1];
    }

    /**
     * Deletes every task in a finished `status` (failed, done, cancelled, skipped) selected by
     * exactly one of `tag`, `keyPrefix`, `type` or `ids` (admin role), with their runs. Answers
     * `{matched, changed}`; repeating it is harmless.
     */
    public function bulkDelete(array $selector): array
    {
        return $this->call('POST', '/tasks/bulk/delete', $selector, true)[1];
    }

    /**
     * The tasks in one status (`status`, default pending), filtered by `type`, `tag`, `keyPrefix`,
     * a page by `offset` and `limit`: ['tasks' => Task[], 'total' => int, 'offset' => int, 'nextOffset' => ?int].
     */
    public function listTasks(array $query = []): array
    {
        $query = http_build_query(self::withoutNulls($query), '', '&', PHP_QUERY_RFC3986);
        $page = $this->call('GET', '/tasks' . ($query === '' ? '' : "?{$query}"))[1];
        $page['tasks'] = array_map([Task::class, 'fromArray'], $page['tasks'] ?? []);
        return $page;
    }

    /** How many tasks are in each status, filtered by `type`, `tag`, `keyPrefix`: ['counts' => [...], 'countedAt' => string]. */
    public function counts(array $query = []): array
    {
        $query = http_build_query(self::withoutNulls($query), '', '&', PHP_QUERY_RFC3986);
        return $this->call('GET', '/tasks/counts' . ($query === '' ? '' : "?{$query}"))[1];
    }

    /**
     * Moves every pending task selected (exactly one of `tag`, `keyPrefix`, `type`) to `runAt`
     * (with `timezone`), or by `shiftMs` with a `requestId` so a repeat moves nothing twice
     * (admin role). Answers `{matched, changed}`.
     */
    public function bulkReschedule(array $change): array
    {
        if (array_key_exists('runAt', $change)) {
            $change['runAt'] = self::runAtValue($change['runAt']);
        }
        return $this->call('POST', '/tasks/bulk/reschedule', self::withoutNulls($change), true)[1];
    }

    public function get(int $id): Task
    {
        return Task::fromArray($this->call('GET', "/tasks/{$id}")[1]);
    }

    /**
     * Finds tasks by id, key, a key's start, its last part after a colon (`SN104500`) or a tag:
     * ['tasks' => Task[], 'tagged' => int] (how many tasks carry q as a tag, all of them).
     */
    public function search(string $q, ?int $limit = null): array
    {
        $query = http_build_query(self::withoutNulls(['q' => $q, 'limit' => $limit]), '', '&', PHP_QUERY_RFC3986);
        $found = $this->call('GET', "/tasks/search?{$query}")[1];
        $found['tasks'] = array_map([Task::class, 'fromArray'], $found['tasks'] ?? []);
        return $found;
    }

    /**
     * Releases a running task whose lease ran out (admin role): pending again, or failed on its
     * last attempt. A ConflictException while its lease still holds.
     */
    public function releaseLease(int $id): Task
    {
        return Task::fromArray($this->call('POST', "/tasks/{$id}/release-lease")[1]);
    }

    public function getByKey(string $key): Task
    {
        return Task::fromArray($this->call('GET', '/tasks/by-key/' . rawurlencode($key))[1]);
    }

    /** Cancels a pending task; a ConflictException (with the task) when it is not pending any more. */
    public function cancel(int $id): Task
    {
        return Task::fromArray($this->call('POST', "/tasks/{$id}/cancel")[1]);
    }

    /**
     * Cancels by key: what a shop does when the order is paid. A ConflictException means the task
     * already ran (check the order), a NotFoundException that there never was one. For a
     * recurring task it ends the series.
     */
    public function cancelByKey(string $key): Task
    {
        return Task::fromArray($this->call('POST', '/tasks/by-key/' . rawurlencode($key) . '/cancel')[1]);
    }

    /** Moves a pending task to `runAt` or `delayMs` from now (a naive runAt is read in `timezone`, else the task's zone). */
    public function reschedule(int $id, int|string|\DateTimeInterface|null $runAt = null, ?int $delayMs = null, ?string $timezone = null): Task
    {
        $body = self::withoutNulls(['runAt' => self::runAtValue($runAt), 'delayMs' => $delayMs, 'timezone' => $timezone]);
        return Task::fromArray($this->call('POST', "/tasks/{$id}/reschedule", $body)[1]);
    }

    /** Replaces a pending task's payload (a 409 PunctualException when it is not pending any more). */
    public function editPayload(int $id, array $payload): Task
    {
        return Task::fromArray($this->call('PUT', "/tasks/{$id}/payload", ['payload' => $payload])[1]);
    }

    /** Deletes a task that is not running, with its runs; answers it as it was. */
    public function delete(int $id): Task
    {
        return Task::fromArray($this->call('DELETE', "/tasks/{$id}")[1]);
    }

    /** The worker types: ['waitingHere' => int, 'types' => [['type', 'leased', 'pending', 'failed'], …]]. */
    public function workers(): array
    {
        return $this->call('GET', '/workers')[1];
    }

    /**
     * The last hour's runs of the whole fleet, from the run history: since, until, runs, done,
     * retries, failed, lost, waited, latenessP50Ms, latenessP99Ms.
     */
    public function lastHour(): array
    {
        return $this->call('GET', '/runs/last-hour')[1];
    }

    /**
     * The test clock's time: ['testClock' => true, 'now' => ISO-8601 UTC, 'nowMs' => int]. Only a
     * service started with `--test-clock` (TEST_CLOCK=on) has one: otherwise a 404 PunctualException.
     */
    public function clock(): array
    {
        return $this->call('GET', '/test/clock')[1];
    }

    /**
     * Moves the test clock `$ms` forward and returns once every task due on the way has run, in due
     * order (retries whose backoff lands inside too). The answer adds 'settled' (false: 'running'
     * names the tasks still running after `$waitMs`), 'steps' and 'held' (due, but paused or pulled).
     */
    public function advance(int $ms, int $waitMs = 10_000): array
    {
        return $this->call('POST', '/test/clock', ['advanceMs' => $ms, 'waitMs' => $waitMs], timeoutMs: $this->timeoutMs + $waitMs)[1];
    }

    /** Moves the test clock to `$at` (epoch ms, ISO-8601 with an offset, a naive local time read in `$timezone`), as advance() does. */
    public function setTime(int|string|\DateTimeInterface $at, ?string $timezone = null, int $waitMs = 10_000): array
    {
        $body = self::withoutNulls(['to' => self::runAtValue($at), 'timezone' => $timezone, 'waitMs' => $waitMs]);
        return $this->call('POST', '/test/clock', $body, timeoutMs: $this->timeoutMs + $waitMs)[1];
    }

    /** Runs a failed task again: now, or at `runAt` / `delayMs` from now; its attempts start over. */
    public function retry(int $id, int|string|\DateTimeInterface|null $runAt = null, ?int $delayMs = null, ?string $timezone = null): Task
    {
        $body = self::withoutNulls(['runAt' => self::runAtValue($runAt), 'delayMs' => $delayMs, 'timezone' => $timezone]);
        return Task::fromArray($this->call('POST', "/tasks/{$id}/retry", $body === [] ? null : $body)[1]);
    }

    /**
     * One page of pending tasks, soonest first (then by id).
     *
     * @return array{tasks: list<Task>, nextCursor: ?string} nextCursor is null on the last page
     */
    public function pending(?string $type = null, ?int $limit = null, ?string $cursor = null): array
    {
        $query = http_build_query(self::withoutNulls(['type' => $type, 'limit' => $limit, 'cursor' => $cursor]), '', '&', PHP_QUERY_RFC3986);
        $page = $this->call('GET', '/tasks/pending' . ($query === '' ? '' : "?{$query}"))[1];
        return [
            'tasks' => array_map([Task::class, 'fromArray'], $page['tasks'] ?? []),
            'nextCursor' => $page['nextCursor'] ?? null,
        ];
    }

    /**
     * Every pending task, a page at a time, soonest first: `foreach ($client->pendingPages() as $tasks)`.
     * Each page is one request; a task created meanwhile shows up if it sorts after the cursor.
     *
     * @return \Generator<int, list<Task>>
     */
    public function pendingPages(?string $type = null, int $pageSize = 500): \Generator
    {
        $cursor = null;
        do {
            $page = $this->pending($type, $pageSize, $cursor);
            if ($page['tasks'] !== []) {
                yield $page['tasks'];
            }
            $cursor = $page['nextCursor'];
        } while ($cursor !== null);
    }

    /**
     * Every pending task, one by one: `foreach ($client->allPending('close_order') as $task)`.
     *
     * @return \Generator<int, Task>
     */
    public function allPending(?string $type = null, int $pageSize = 500): \Generator
    {
        foreach ($this->pendingPages($type, $pageSize) as $tasks) {
            yield from $tasks;
        }
    }

    /**
     * The latest tasks to finish with `status` (done, failed, skipped, cancelled), newest first.
     *
     * @return list<Task>
     */
    public function recent(string $status = 'done', int $limit = 50): array
    {
        $query = http_build_query(['status' => $status, 'limit' => $limit], '', '&', PHP_QUERY_RFC3986);
        return array_map([Task::class, 'fromArray'], $this->call('GET', "/tasks/recent?{$query}")[1]['tasks'] ?? []);
    }

    /**
     * A task's runs (one per attempt), newest first: ['runs' => [...], 'nextCursor' => ?string].
     *
     * @return array<string, mixed>
     */
    public function runs(int $id, ?int $limit = null, ?string $cursor = null): array
    {
        $query = http_build_query(array_filter(['limit' => $limit, 'cursor' => $cursor], static fn ($v) => $v !== null));
        return $this->call('GET', "/tasks/{$id}/runs" . ($query === '' ? '' : "?{$query}"))[1];
    }

    /**
     * The audit trail (admin), newest first: ['entries' => [...], 'nextCursor' => ?string].
     * Filters: actor, action, target, since, until, limit, cursor.
     *
     * @param array<string, string|int> $filters
     * @return array<string, mixed>
     */
    public function audit(array $filters = []): array
    {
        $query = http_build_query($filters);
        return $this->call('GET', '/audit' . ($query === '' ? '' : "?{$query}"))[1];
    }

    /**
     * The backlog at a glance: pending, running, failed, armed, latenessP50Ms, latenessP99Ms, countedAt.
     */
    public function summary(): array
    {
        return $this->call('GET', '/tasks/summary')[1];
    }

    /**
     * The processes sharing the tasks (SHARDING=on) and how many of the 256 shards each holds:
     * sharding, self, leaseMs, shards, unowned, and members (id, heartbeatAgeMs, live, shards, self).
     */
    public function cluster(): array
    {
        return $this->call('GET', '/cluster')[1];
    }

    /** True when the process answers at all (/healthz). */
    public function healthy(): bool
    {
        return ($this->call('GET', '/healthz')[1]['status'] ?? null) === 'ok';
    }

    /**
     * Every known task type: type, paused, maxConcurrency, ratePerSecond, groupBy, running and
     * waiting (in the process that answered), due (pending and due, in the whole table), updatedAt.
     *
     * @return list<array<string, mixed>>
     */
    public function types(): array
    {
        return $this->call('GET', '/types')[1]['types'] ?? [];
    }

    /**
     * Sets a type's run limits (an admin token): any of maxConcurrency (runs at once),
     * ratePerSecond (starts in any one second) and groupBy (a payload field: the limits apply per
     * value of it). A key left out is kept; null clears it. The limits hold for every process together.
     *
     * @param array{maxConcurrency?: ?int, ratePerSecond?: int|float|null, groupBy?: ?string} $limits
     * @return array<string, mixed> the type as it is now
     */
    public function setLimits(string $type, array $limits): array
    {
        if ($limits === []) {
            throw new \InvalidArgumentException('setLimits needs at least one of maxConcurrency, ratePerSecond, groupBy');
        }
        return $this->call('PUT', '/types/' . rawurlencode($type) . '/limits', $limits, true)[1];
    }

    /**
     * Pauses a type (an admin token): its due tasks wait, pending with no attempt used, until
     * resume(). Stored: it holds through restarts and for every process.
     *
     * @return array<string, mixed> the type as it is now
     */
    public function pause(string $type): array
    {
        return $this->call('POST', '/types/' . rawurlencode($type) . '/pause', null, true)[1];
    }

    /**
     * Resumes a type (an admin token): what waited runs in runAt order.
     *
     * @return array<string, mixed> the type as it is now
     */
    public function resume(string $type): array
    {
        return $this->call('POST', '/types/' . rawurlencode($type) . '/resume', null, true)[1];
    }

    /** The role of this client's token: "read", "write" or "admin" (a call beyond it is a 403). */
    public function role(): string
    {
        return (string) ($this->call('GET', '/auth/whoami')[1]['role'] ?? '');
    }

    /** True when punctual has armed its timers and its database answers (/readyz); false on its 503. */
    public function ready(): bool
    {
        try {
            $this->call('GET', '/readyz');
            return true;
        } catch (ApiException $error) {
            if ($error->status === 503) {
                return false;
            }
            throw $error;
        }
    }

    /**
     * Leases up to `max` due tasks of worker types (worker role). With `waitMs` (at most 30000)
     * the request waits until one falls due, or answers none when that long passed.
     *
     * @param list<string> $types
     * @return list<LeasedTask>
     */
    public function lease(array $types, int $max = 1, int $leaseMs = 30_000, int $waitMs = 0): array
    {
        return $this->leaseUnless($types, $max, $leaseMs, $waitMs, null);
    }

    /**
     * lease(), given up (a ConnectionException) as soon as `$stop` answers true while it waits.
     *
     * @param list<string> $types
     * @param null|callable(): bool $stop
     * @return list<LeasedTask>
     * @internal the worker loop's: a SIGTERM must not wait out a long poll
     */
    public function leaseUnless(array $types, int $max, int $leaseMs, int $waitMs, ?callable $stop): array
    {
        $body = ['types' => array_values($types), 'max' => $max, 'leaseMs' => $leaseMs, 'waitMs' => $waitMs];
        // A lost answer may have leased tasks: they come back when the lease runs out, so a retry is harmless.
        $answer = $this->call('POST', '/workers/lease', $body, true, true, $this->timeoutMs + $waitMs, $stop)[1];
        return array_map(static fn (array $task): LeasedTask => LeasedTask::fromArray($task), $answer['tasks'] ?? []);
    }

    /**
     * The worker loop: leases one task of `types` at a time (waiting for one), runs `handle` on
     * it, and acks it when it returns; a throw nacks it with the exception's message (retried with
     * backoff), a PermanentFailure fails it for good. The lease is extended while `handle` runs,
     * and SIGTERM or SIGINT stop the loop between tasks, where pcntl is there (Worker.php).
     * `handle` gets the task and a callable that extends its lease now.
     *
     * @param list<string> $types
     * @param callable(LeasedTask $task, callable(): void $extend): mixed $handle
     * @param int|null $maxTasks stop after this many tasks (null: until a signal)
     * @param null|callable(\Throwable $error): void $onError a lease or settle that failed (the loop goes on)
     * @return int how many tasks it handled
     */
    public function work(array $types, callable $handle, int $leaseMs = 30_000, int $waitMs = 25_000, ?int $maxTasks = null, ?callable $onError = null): int
    {
        // Lease extensions go out on a connection of their own: a SIGALRM may come mid-call.
        $extender = new self($this->baseUrl, $this->token, $this->timeoutMs, $this->connectTimeoutMs, $this->retries, $this->retryDelayMs);
        return (new Worker($this, $extender, $types, $handle, $leaseMs, $waitMs, $maxTasks, $onError))->run();
    }

    /** The leased task is done; a ConflictException when the lease is not this token's any more. */
    public function ack(LeasedTask $task): Task
    {
        $id = $task->id;
        return Task::fromArray($this->call('POST', "/tasks/{$id}/ack", ['leaseToken' => $task->leaseToken])[1]);
    }

    /**
     * Several leased tasks are done, in one request (up to 1,000; acks commit in groups of up to 200):
     * one result per task, in order (`['id' => …, 'status' => 200|404|409, 'message' => …]`), and
     * how many were acked; a 404 or 409 refuses only its own task.
     *
     * @param list<LeasedTask> $tasks
     * @return array{results: list<array{id: int, status: int, message?: string}>, acked: int, refused: int}
     */
    public function ackAll(array $tasks): array
    {
        $acks = array_map(fn (LeasedTask $task) => ['id' => $task->id, 'leaseToken' => $task->leaseToken], $tasks);
        return $this->call('POST', '/workers/ack', ['acks' => $acks])[1];
    }

    /**
     * The leased task failed: retried with backoff (or at `retryAt`), or failed for good when
     * `permanent`; `error` is kept as its lastError.
     */
    public function nack(LeasedTask $task, string $error, int|string|\DateTimeInterface|null $retryAt = null, bool $permanent = false): Task
    {
        $body = self::withoutNulls([
            'leaseToken' => $task->leaseToken,
            'error' => mb_substr($error, 0, 2000),
            'retryAt' => self::runAtValue($retryAt),
            'permanent' => $permanent ? true : null,
        ]);
        $id = $task->id;
        return Task::fromArray($this->call('POST', "/tasks/{$id}/nack", $body)[1]);
    }

    /** The leased task needs longer: its lease runs `leaseMs` from now. */
    public function extend(LeasedTask $task, int $leaseMs): Task
    {
        $id = $task->id;
        return Task::fromArray($this->call('POST', "/tasks/{$id}/extend", ['leaseToken' => $task->leaseToken, 'leaseMs' => $leaseMs], true)[1]);
    }

    /** The Prometheus metrics, as text. */
    public function metrics(): string
    {
        return $this->call('GET', '/metrics', null, true, false)[1];
    }

    /**
     * A create's trace headers: the call's own context, else the client's provider's; an empty
     * value is not sent (the server validates the rest, and ignores what is malformed).
     *
     * @return list<string>
     */
    private function traceHeaders(?array $given): array
    {
        $context = $given ?? ($this->traceContext !== null ? ($this->traceContext)() : null);
        $headers = [];
        foreach (['traceparent', 'tracestate'] as $name) {
            $value = is_array($context) ? ($context[$name] ?? null) : null;
            if (is_string($value) && $value !== '') {
                $headers[] = "{$name}: {$value}";
            }
        }
        return $headers;
    }

    /**
     * Sends one request, retrying connection errors as the class header says.
     *
     * @param list<string> $headers more request headers ("Name: value")
     * @return array{0: int, 1: mixed} the status and the decoded JSON body (the raw text when $json is false)
     */
    private function call(string $method, string $path, ?array $body = null, ?bool $safe = null, bool $json = true, ?int $timeoutMs = null, ?callable $stop = null, array $headers = []): array
    {
        $safe ??= $method === 'GET';
        $text = $body === null ? null : json_encode($body, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
        for ($attempt = 1; ; $attempt++) {
            try {
                [$status, $answer] = $this->send($method, $path, $text, $attempt, $timeoutMs ?? $this->timeoutMs, $stop, $headers);
                break;
            } catch (ConnectionException $error) {
                if ($stop !== null && $stop()) {
                    throw $error;
                }
                $sent = !in_array($error->curlErrno, self::NOT_SENT, true);
                if ($attempt > $this->retries || ($sent && !$safe)) {
                    throw $error;
                }
                if ($this->onRetry !== null) {
                    ($this->onRetry)($attempt, $error);
                }
                usleep($this->retryDelayMs * (2 ** ($attempt - 1)) * 1000);
            }
        }
        if (!$json && $status < 300) {
            return [$status, $answer];
        }
        $decoded = $answer === '' ? null : json_decode($answer, true);
        if ($status >= 300) {
            throw ApiException::fromResponse($status, is_array($decoded) ? $decoded : ['message' => "punctual answered {$status}: " . substr($answer, 0, 200)]);
        }
        if (!is_array($decoded)) {
            throw new ApiException($status, 'PUNCTUAL_CLIENT_BAD_ANSWER', "{$method} {$path} answered {$status} with no JSON object: " . substr($answer, 0, 200));
        }
        return [$status, $decoded];
    }

    /** @return array{0: int, 1: string} */
    private function send(string $method, string $path, ?string $body, int $attempt, int $timeoutMs, ?callable $stop = null, array $extra = []): array
    {
        $this->curl ??= curl_init();
        curl_reset($this->curl);
        $headers = ['Accept: application/json', ...$extra];
        if ($this->token !== null && $this->token !== '') {
            $headers[] = "Authorization: Bearer {$this->token}";
        }
        if ($body !== null) {
            $headers[] = 'Content-Type: application/json';
        }
        curl_setopt_array($this->curl, [
            CURLOPT_URL => $this->baseUrl . $path,
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_HTTPHEADER => $headers,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_NOSIGNAL => true,
            CURLOPT_TIMEOUT_MS => $timeoutMs,
            CURLOPT_CONNECTTIMEOUT_MS => $this->connectTimeoutMs,
        ]);
        if ($body !== null) {
            curl_setopt($this->curl, CURLOPT_POSTFIELDS, $body);
        }
        if ($stop !== null) {
            // curl asks about once a second, and more often while bytes move: non-zero gives up.
            curl_setopt($this->curl, CURLOPT_NOPROGRESS, false);
            curl_setopt($this->curl, CURLOPT_XFERINFOFUNCTION, static fn (): int => $stop() ? 1 : 0);
        }
        $answer = curl_exec($this->curl);
        if ($answer === false) {
            $errno = curl_errno($this->curl);
            throw new ConnectionException("punctual did not answer {$method} {$path}: " . curl_error($this->curl), $errno, $attempt);
        }
        return [(int) curl_getinfo($this->curl, CURLINFO_RESPONSE_CODE), (string) $answer];
    }

    private static function runAtValue(int|string|\DateTimeInterface|null $runAt): int|string|null
    {
        // An instant with its offset, to the millisecond: no zone needs guessing.
        return $runAt instanceof \DateTimeInterface ? $runAt->format('Y-m-d\TH:i:s.vP') : $runAt;
    }

    private static function withoutNulls(array $fields): array
    {
        return array_filter($fields, static fn ($value) => $value !== null);
    }
}
