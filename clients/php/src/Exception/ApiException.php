<?php

declare(strict_types=1);

namespace Punctual\Exception;

use Punctual\Task;

/**
 * punctual answered with an error status. The message is the server's own (it names the field at
 * fault, e.g. "body/runAt must not be more than 10 years ahead"); `errorCode` is its code
 * (PUNCTUAL_BAD_REQUEST, PUNCTUAL_CONFLICT, ...). A status without a class of its own
 * (500, 502, a proxy's 429) arrives as this class.
 */
class ApiException extends PunctualException
{
    public function __construct(
        public readonly int $status,
        public readonly string $errorCode,
        string $message,
        /** The parsed error body, as the server sent it. */
        public readonly array $body = [],
    ) {
        parent::__construct($message, $status);
    }

    /** The exception class for `status`, carrying the server's code and message. */
    public static function fromResponse(int $status, array $body): self
    {
        $code = is_string($body['code'] ?? null) ? $body['code'] : 'UNKNOWN';
        $message = is_string($body['message'] ?? null) ? $body['message'] : "punctual answered {$status}";
        return match ($status) {
            400 => new BadRequestException($status, $code, $message, $body),
            401 => new UnauthorizedException($status, $code, $message, $body),
            403 => new ForbiddenException($status, $code, $message, $body),
            404 => new NotFoundException($status, $code, $message, $body),
            409 => new ConflictException($status, $code, $message, $body, is_array($body['task'] ?? null) ? Task::fromArray($body['task']) : null),
            413 => new PayloadTooLargeException($status, $code, $message, $body),
            503 => new ServiceUnavailableException($status, $code, $message, $body),
            default => new self($status, $code, $message, $body),
        };
    }
}
