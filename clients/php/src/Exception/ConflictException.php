<?php

declare(strict_types=1);

namespace Punctual\Exception;

use Punctual\Task;

/**
 * 409: the key already names a task with other content, or the task is not in a state that
 * allows the call (cancel a task that already ran, retry one that did not fail). `task` is the
 * task as it is now, as the server sent it.
 */
final class ConflictException extends ApiException
{
    public function __construct(int $status, string $errorCode, string $message, array $body = [], public readonly ?Task $task = null)
    {
        parent::__construct($status, $errorCode, $message, $body);
    }
}
