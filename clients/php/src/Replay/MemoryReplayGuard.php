<?php

declare(strict_types=1);

namespace Punctual\Replay;

/** A ReplayGuard for one long-running PHP process (Workerman, Swoole, a queue worker). */
final class MemoryReplayGuard implements ReplayGuard
{
    /** @var array<string, float> id => expiry, epoch ms */
    private array $seen = [];

    public function firstSeen(string $id, int $ttlMs): bool
    {
        $now = microtime(true) * 1000;
        foreach ($this->seen as $seenId => $until) {
            if ($until < $now) {
                unset($this->seen[$seenId]);
            }
        }
        if (isset($this->seen[$id])) {
            return false;
        }
        $this->seen[$id] = $now + $ttlMs;
        return true;
    }
}
