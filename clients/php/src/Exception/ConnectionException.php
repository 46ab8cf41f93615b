<?php

declare(strict_types=1);

namespace Punctual\Exception;

/**
 * No answer from punctual: it could not be reached, the connection broke, or the call timed out
 * (after the retries the call allowed). `curlErrno` is curl's error number; `attempts` how many
 * times the call was sent or tried.
 */
class ConnectionException extends PunctualException
{
    public function __construct(string $message, public readonly int $curlErrno, public readonly int $attempts)
    {
        parent::__construct($message, $curlErrno);
    }

    public function isTimeout(): bool
    {
        return $this->curlErrno === CURLE_OPERATION_TIMEDOUT;
    }
}
