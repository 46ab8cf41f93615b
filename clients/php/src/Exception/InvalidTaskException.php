<?php

declare(strict_types=1);

namespace Punctual\Exception;

/**
 * Enqueue::inTransaction refused a task before writing it, for the reason POST /tasks would give
 * a 400. The message names the field the same way ("runAt must not be more than 10 years ahead").
 */
final class InvalidTaskException extends PunctualException
{
    public function __construct(public readonly string $field, string $problem)
    {
        parent::__construct("{$field} {$problem}");
    }
}
