<?php

declare(strict_types=1);

namespace Punctual\Exception;

/**
 * Enqueue::inTransaction: the key already names a task with another type, payload or time (the
 * API's 409). Nothing was written; the shop's transaction is still usable.
 */
final class KeyConflictException extends PunctualException
{
    public function __construct(string $message, public readonly int $existingId)
    {
        parent::__construct($message);
    }
}
