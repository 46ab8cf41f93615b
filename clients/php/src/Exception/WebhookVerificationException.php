<?php

declare(strict_types=1);

namespace Punctual\Exception;

/**
 * A webhook call that must not be trusted. `reason` says why, for the receiver's log:
 * malformed (no usable X-Punctual-Signature), expired (timestamp outside the tolerance),
 * signature (no v1= matches a secret), replayed (this exact signature was seen before).
 */
final class WebhookVerificationException extends PunctualException
{
    public const MALFORMED = 'malformed';
    public const EXPIRED = 'expired';
    public const SIGNATURE = 'signature';
    public const REPLAYED = 'replayed';

    public function __construct(public readonly string $reason, string $message)
    {
        parent::__construct($message);
    }
}
