<?php

declare(strict_types=1);

namespace Punctual\Exception;

/** 413: the request body is larger than punctual accepts (128 KiB; a payload at most 64 KiB). */
final class PayloadTooLargeException extends ApiException
{
}
