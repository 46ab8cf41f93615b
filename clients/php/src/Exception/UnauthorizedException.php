<?php

declare(strict_types=1);

namespace Punctual\Exception;

/** 401: no bearer token, or the wrong one (API_TOKEN). */
final class UnauthorizedException extends ApiException
{
}
