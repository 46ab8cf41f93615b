<?php

declare(strict_types=1);

namespace Punctual;

/**
 * A task as punctual answers it (GET /tasks/:id and every other task route). Times are strings
 * as the server writes them: `runAt` ISO-8601 UTC with milliseconds, `runAtLocal` the same
 * instant with the offset of `timezone`. `runAt()` gives it as a DateTimeImmutable.
 */
final class Task
{
    public function __construct(
        public readonly int $id,
        public readonly ?string $key,
        public readonly string $type,
        public readonly array $payload,
        /** pending | running | done | failed | cancelled | skipped */
        public readonly string $status,
        public readonly string $runAt,
        public readonly string $runAtLocal,
        public readonly string $timezone,
        public readonly int $attempts,
        public readonly int $maxAttempts,
        public readonly string $misfire,
        public readonly ?string $lastError,
        public readonly string $createdAt,
        public readonly string $updatedAt,
        public readonly ?string $finishedAt,
        public readonly ?string $cron = null,
        public readonly ?int $seriesId = null,
        /** -10 to 10: among tasks due now or overdue, a higher one is claimed first. */
        public readonly int $priority = 0,
        /** No attempt starts later than this many ms after runAt; past it the task ends skipped, lastError "expired: …". */
        public readonly ?int $expireAfterMs = null,
        /** Its group: a type whose limits say groupBy "group" limits each group on its own. */
        public readonly ?string $group = null,
        /** What the latest successful run's handler answered (`closed`, `no such order`), at most 200 characters; null when it said nothing. */
        public readonly ?string $lastResult = null,
        /** @var list<string> the tags given at create */
        public readonly array $tags = [],
        /** How late the latest run started, of what punctual controls, in ms; null before a run. */
        public readonly ?int $latenessMs = null,
        /** A webhook run: the latest run's HTTP status (0: no answer came). */
        public readonly ?int $lastHttpStatus = null,
        /** A webhook run: how long the latest run took, in ms. */
        public readonly ?int $lastDurationMs = null,
        /** A webhook run: the size of the latest answer's body as read, in bytes. */
        public readonly ?int $lastResponseBytes = null,
    ) {
    }

    public static function fromArray(array $task): self
    {
        return new self(
            (int) $task['id'],
            $task['key'] ?? null,
            (string) $task['type'],
            is_array($task['payload'] ?? null) ? $task['payload'] : [],
            (string) $task['status'],
            (string) $task['runAt'],
            (string) $task['runAtLocal'],
            (string) $task['timezone'],
            (int) $task['attempts'],
            (int) $task['maxAttempts'],
            (string) $task['misfire'],
            $task['lastError'] ?? null,
            (string) $task['createdAt'],
            (string) $task['updatedAt'],
            $task['finishedAt'] ?? null,
            $task['cron'] ?? null,
            isset($task['seriesId']) ? (int) $task['seriesId'] : null,
            (int) ($task['priority'] ?? 0),
            isset($task['expireAfterMs']) ? (int) $task['expireAfterMs'] : null,
            $task['group'] ?? null,
            $task['lastResult'] ?? null,
            array_values(array_map('strval', (array) ($task['tags'] ?? []))),
            isset($task['latenessMs']) ? (int) $task['latenessMs'] : null,
            isset($task['lastHttpStatus']) ? (int) $task['lastHttpStatus'] : null,
            isset($task['lastDurationMs']) ? (int) $task['lastDurationMs'] : null,
            isset($task['lastResponseBytes']) ? (int) $task['lastResponseBytes'] : null,
        );
    }

    /** The instant the task runs, in its own zone. */
    public function runAt(): \DateTimeImmutable
    {
        return new \DateTimeImmutable($this->runAtLocal);
    }

    public function isPending(): bool
    {
        return $this->status === 'pending';
    }

    /** Skipped because it could not start within its expireAfterMs. */
    public function isExpired(): bool
    {
        return $this->status === 'skipped' && str_starts_with((string) $this->lastError, 'expired:');
    }
}
