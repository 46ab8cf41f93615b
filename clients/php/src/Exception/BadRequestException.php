<?php

declare(strict_types=1);

namespace Punctual\Exception;

/** 400: the request is wrong; the message names the field (nothing was changed). */
final class BadRequestException extends ApiException
{
}
