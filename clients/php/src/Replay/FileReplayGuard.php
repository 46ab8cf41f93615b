<?php

declare(strict_types=1);

namespace Punctual\Replay;

/**
 * A ReplayGuard for PHP-FPM on one machine: one file per accepted call in a directory, created
 * with mode "x" (fails if it exists), which is atomic across processes. Expired files are swept
 * now and then. Several machines behind a balancer need a shared store (Redis) instead.
 */
final class FileReplayGuard implements ReplayGuard
{
    public function __construct(private readonly string $directory)
    {
        if (!is_dir($directory) && !@mkdir($directory, 0700, true) && !is_dir($directory)) {
            throw new \RuntimeException("cannot create the replay directory {$directory}");
        }
    }

    public function firstSeen(string $id, int $ttlMs): bool
    {
        $now = microtime(true) * 1000;
        if (random_int(1, 100) === 1) {
            $this->sweep($now);
        }
        $path = $this->directory . '/' . hash('sha256', $id);
        $file = @fopen($path, 'x');
        if ($file === false) {
            $until = (float) @file_get_contents($path);
            if ($until >= $now) {
                return false;
            }
            // Expired: take it over.
            file_put_contents($path, (string) ($now + $ttlMs), LOCK_EX);
            return true;
        }
        fwrite($file, (string) ($now + $ttlMs));
        fclose($file);
        return true;
    }

    private function sweep(float $now): void
    {
        foreach (glob($this->directory . '/*') ?: [] as $path) {
            if ((float) @file_get_contents($path) < $now) {
                @unlink($path);
            }
        }
    }
}
