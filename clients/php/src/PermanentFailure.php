<?php

declare(strict_types=1);

namespace Punctual;

/**
 * Thrown by a work() callback for a failure no retry can fix (the member does not exist, the
 * coupon was deleted): the task is nacked as permanent and fails for good, with this message.
 */
class PermanentFailure extends \RuntimeException
{
}
