<?php

declare(strict_types=1);

namespace Punctual\Exception;

/**
 * Everything this package throws extends this class, so a shop can catch "punctual went wrong"
 * in one place and the precise kinds where it cares (a 409, a 404, an outage).
 */
abstract class PunctualException extends \RuntimeException
{
}
