<?php

declare(strict_types=1);

namespace Punctual\Replay;

/**
 * Remembers which signed webhook calls a receiver has accepted, for as long as their timestamp
 * could still pass the tolerance window; after that the window itself refuses them. Back it with
 * what all the receiver's PHP processes share (Redis SET NX EX, a table with a unique key): an
 * in-process memory forgets between PHP-FPM requests.
 */
interface ReplayGuard
{
    /**
     * Records `id` for `ttlMs` and answers true, or answers false when it was recorded before
     * and has not expired: the call is a replay. Must be atomic (check and record in one step).
     */
    public function firstSeen(string $id, int $ttlMs): bool;
}
