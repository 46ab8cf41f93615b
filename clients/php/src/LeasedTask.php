<?php

declare(strict_types=1);

namespace Punctual;

/**
 * A task of a worker type leased to this worker (POST /workers/lease): its payload, the attempt
 * this lease runs (1 on the first run), the idempotency key that stays the same across all its
 * attempts, and the lease token that ack, nack and extend must name.
 *
 * `traceparent` and `tracestate` are the W3C trace context of the task's run, in the trace of
 * the create that made it (null when it was created without one): start your span as a child of
 * this, and the work shows up in the shop's trace.
 */
final class LeasedTask
{
    public function __construct(
        public readonly int $id,
        public readonly ?string $key,
        public readonly string $type,
        public readonly array $payload,
        public readonly string $runAt,
        public readonly string $runAtLocal,
        public readonly string $timezone,
        public readonly int $attempt,
        public readonly int $maxAttempts,
        public readonly string $leaseToken,
        public readonly string $leaseUntil,
        public readonly string $idempotencyKey,
        public readonly ?string $traceparent = null,
        public readonly ?string $tracestate = null,
    ) {
    }

    public static function fromArray(array $task): self
    {
        return new self(
            (int) $task['id'],
            $task['key'] ?? null,
            (string) $task['type'],
            is_array($task['payload'] ?? null) ? $task['payload'] : [],
            (string) $task['runAt'],
            (string) $task['runAtLocal'],
            (string) $task['timezone'],
            (int) $task['attempt'],
            (int) $task['maxAttempts'],
            (string) $task['leaseToken'],
            (string) $task['leaseUntil'],
            (string) $task['idempotencyKey'],
            self::text($task['traceparent'] ?? null),
            self::text($task['tracestate'] ?? null),
        );
    }

    private static function text(mixed $value): ?string
    {
        return is_string($value) && $value !== '' ? $value : null;
    }
}
