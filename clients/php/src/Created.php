<?php

declare(strict_types=1);

namespace Punctual;

/**
 * What Client::create answers: the task, and whether this call made it (201) or found it under
 * its key with the same content (200: a create sent again after a timeout, say).
 */
final class Created
{
    public function __construct(public readonly Task $task, public readonly bool $created)
    {
    }
}
