<?php

declare(strict_types=1);

namespace Punctual\Exception;

/** 404: no task with that id or key. */
final class NotFoundException extends ApiException
{
}
