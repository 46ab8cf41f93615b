<?php

declare(strict_types=1);

namespace Punctual\Tests\Support;

/** A conformance case's step did not answer as the case expects; the message says where and how. */
final class CaseFailed extends \RuntimeException
{
}
