<?php

declare(strict_types=1);

namespace Punctual\Exception;

/** 403: refused by something in front of punctual (a gateway or proxy); punctual itself answers 401. */
final class ForbiddenException extends ApiException
{
}
