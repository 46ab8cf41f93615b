<?php

declare(strict_types=1);

namespace Punctual\Tests\Support;

use PHPUnit\Framework\TestCase;
use Punctual\Client;

/**
 * The real punctual and database the run started, for every test: a client with the token, a
 * PDO on the service's database, and waiting for conditions (never for fixed sleeps).
 */
abstract class ServiceTestCase extends TestCase
{
    protected static function client(array $options = []): Client
    {
        return new Client(getenv('PUNCTUAL_URL'), getenv('PUNCTUAL_TOKEN'), ...$options);
    }

    protected static function pdo(): \PDO
    {
        return new \PDO(getenv('PUNCTUAL_DSN'), getenv('PUNCTUAL_DB_USER') ?: 'root', getenv('PUNCTUAL_DB_PASSWORD') ?: '', [
            \PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION,
        ]);
    }

    /** A name no other test run uses. */
    protected static function unique(string $prefix): string
    {
        return $prefix . bin2hex(random_bytes(4));
    }

    /**
     * Polls `check` until it answers something other than null/false; fails after `timeoutMs`.
     */
    protected static function waitFor(callable $check, int $timeoutMs, string $what): mixed
    {
        $deadline = microtime(true) + $timeoutMs / 1000;
        for (;;) {
            $value = $check();
            if ($value !== null && $value !== false) {
                return $value;
            }
            if (microtime(true) > $deadline) {
                self::fail("timed out after {$timeoutMs} ms waiting for {$what}");
            }
            usleep(50_000);
        }
    }

    protected static function scalar(\PDO $pdo, string $sql, array $values = []): mixed
    {
        $statement = $pdo->prepare($sql);
        $statement->execute($values);
        return $statement->fetchColumn();
    }
}
