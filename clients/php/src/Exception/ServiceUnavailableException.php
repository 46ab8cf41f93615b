<?php

declare(strict_types=1);

namespace Punctual\Exception;

/** 503: punctual is up but its database is not (or it is stopping). A create with a key is safe to send again. */
final class ServiceUnavailableException extends ApiException
{
}
