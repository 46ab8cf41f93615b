<?php

declare(strict_types=1);

namespace Punctual;

use Punctual\Exception\InvalidTaskException;
use Punctual\Exception\KeyConflictException;

/**
 * The safest enqueue there is: the task's row written in the shop's own order transaction, so
 * the order and its close commit together or not at all. punctual finds the row within
 * REFILL_INTERVAL_MS and arms it.
 *
 * What it decides:
 * - It refuses what POST /tasks would answer with a 400, with the same words (type, payload shape
 *   and size and depth, runAt forms and the ten-year limit, delayMs, timezone, key, maxAttempts,
 *   misfire, and close_order's payload), because a bad row would only fail later, when it runs.
 *   Other handlers' payloads are checked by punctual when the task runs (a refused one fails at
 *   once, visible with its lastError): their rules (a webhook's allowed hosts) live in the service.
 * - Times are computed here and written as UTC, so neither the connection's time_zone nor PHP's
 *   date.timezone matters. A naive runAt needs `timezone`: the service's TIMEZONE is not known
 *   here, and guessing it would move the task by hours. delayMs is counted by the database clock
 *   (UTC_TIMESTAMP(3)), in the same statement that sets created_at.
 * - Without `timezone`, a runAt written with an offset (or a DateTimeInterface, sent with its
 *   offset) keeps it, as the API does: the task's zone is the fixed zone of a whole-hour offset
 *   (`-05:00` is `Etc/GMT+5`), else UTC (where the API would say TIMEZONE, not known here).
 * - A key already in the table: the same content answers the existing id (a retried
 *   transaction), other content throws KeyConflictException, as the API's 200 and 409 do. A
 *   failed INSERT leaves the shop's transaction usable.
 * - Recurring tasks (cron) go through the API, which checks the expression.
 */
final class Enqueue
{
    private const MAX_PAYLOAD_BYTES = 64 * 1024;
    private const MAX_PAYLOAD_DEPTH = 31;
    /** Epoch-ms values below this are almost surely seconds sent by mistake (before 1973-03-03). */
    private const SMALLEST_EPOCH_MS = 100_000_000_000;
    private const TEN_YEARS_MS = 3653 * 24 * 3600 * 1000;
    private const MAX_YEARS_AHEAD = 10;

    /**
     * Writes one task row with `$pdo`, which must be inside the shop's open transaction. Answers
     * the task's id. Give exactly one of `runAt` (ISO-8601 with an offset, naive local with
     * `timezone`, epoch milliseconds, or a DateTimeInterface) and `delayMs`.
     *
     * @param string $table punctual's table, punctual_tasks, or e.g. "punctual.punctual_tasks" when it lives in another schema
     * @param int|null $nowMs the clock, in epoch ms (tests); default the system clock
     * @throws InvalidTaskException what the API would refuse with a 400; nothing was written
     * @throws KeyConflictException the key names a task with other content; nothing was written
     * @throws \LogicException when $pdo is not in a transaction
     */
    public static function inTransaction(
        \PDO $pdo,
        string $type,
        array $payload = [],
        int|string|\DateTimeInterface|null $runAt = null,
        ?int $delayMs = null,
        ?string $timezone = null,
        ?string $key = null,
        ?int $maxAttempts = null,
        ?string $misfire = null,
        string $table = 'punctual_tasks',
        ?int $nowMs = null,
    ): int {
        if (!$pdo->inTransaction()) {
            throw new \LogicException('Enqueue::inTransaction needs the transaction of the order: call $pdo->beginTransaction() first');
        }
        if (!preg_match('/^[A-Za-z0-9_$]{1,64}(\.[A-Za-z0-9_$]{1,64})?$/', $table)) {
            throw new \InvalidArgumentException("table must be a table name such as punctual_tasks or punctual.punctual_tasks, got {$table}");
        }
        $row = self::validate($type, $payload, $runAt, $delayMs, $timezone, $key, $maxAttempts, $misfire, $nowMs ?? (int) floor(microtime(true) * 1000));
        $quoted = implode('.', array_map(static fn (string $part) => "`{$part}`", explode('.', $table)));

        $columns = ['type', 'payload', 'timezone'];
        $values = [$row['type'], $row['payload'], $row['timezone']];
        foreach (['task_key' => $row['key'], 'max_attempts' => $row['maxAttempts'], 'misfire' => $row['misfire']] as $column => $value) {
            if ($value !== null) {
                $columns[] = $column;
                $values[] = $value;
            }
        }
        $placeholders = array_fill(0, count($values), '?');
        $columns[] = 'run_at';
        if ($row['delayMs'] !== null) {
            // The same UTC_TIMESTAMP(3) as created_at's default in this statement: run_at − created_at = delayMs.
            $placeholders[] = 'UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND';
            $values[] = $row['delayMs'] * 1000;
        } else {
            $placeholders[] = '?';
            $values[] = self::utcText($row['runAtMs']);
        }
        $sql = "INSERT INTO {$quoted} (" . implode(', ', $columns) . ') VALUES (' . implode(', ', $placeholders) . ')';

        $duplicate = false;
        try {
            $statement = $pdo->prepare($sql);
            if ($statement === false || !$statement->execute($values)) {
                $info = $statement === false ? $pdo->errorInfo() : $statement->errorInfo();
                if ((int) ($info[1] ?? 0) !== 1062) {
                    throw new \PDOException('INSERT INTO ' . $table . ' failed: ' . ($info[2] ?? 'unknown error'));
                }
                $duplicate = true;
            }
        } catch (\PDOException $error) {
            if ((int) ($error->errorInfo[1] ?? 0) !== 1062) {
                throw $error;
            }
            $duplicate = true;
        }
        if (!$duplicate) {
            return (int) $pdo->lastInsertId();
        }
        return self::sameTask($pdo, $quoted, $row);
    }

    /**
     * The checks POST /tasks makes, in its words. Answers the row's values.
     *
     * @return array{type: string, payload: string, timezone: string, key: ?string, maxAttempts: ?int, misfire: ?string, runAtMs: ?int, delayMs: ?int}
     */
    public static function validate(
        string $type,
        array $payload,
        int|string|\DateTimeInterface|null $runAt,
        ?int $delayMs,
        ?string $timezone,
        ?string $key,
        ?int $maxAttempts,
        ?string $misfire,
        int $nowMs,
    ): array {
        $length = self::characters($type);
        if ($length < 1 || $length > 64) {
            throw new InvalidTaskException('type', 'must be 1 to 64 characters long');
        }
        if ($payload !== [] && array_is_list($payload)) {
            throw new InvalidTaskException('payload', 'must be object');
        }
        $depthProblem = self::depthProblem($payload);
        if ($depthProblem !== null) {
            throw new InvalidTaskException('payload', $depthProblem);
        }
        try {
            $json = json_encode($payload === [] ? new \stdClass() : $payload, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR | JSON_PRESERVE_ZERO_FRACTION);
        } catch (\JsonException $error) {
            throw new InvalidTaskException('payload', 'must not contain a string that is not valid Unicode (' . $error->getMessage() . ')');
        }
        if ($type === 'close_order') {
            self::checkCloseOrder($payload);
        }
        if (strlen($json) > self::MAX_PAYLOAD_BYTES) {
            throw new InvalidTaskException('payload', 'must not be larger than ' . self::MAX_PAYLOAD_BYTES . ' bytes as JSON');
        }
        if ($key !== null) {
            $keyLength = self::characters($key);
            if ($keyLength === null) {
                throw new InvalidTaskException('key', 'must not contain a lone surrogate (it is not valid Unicode)');
            }
            if ($keyLength < 1 || $keyLength > 191) {
                throw new InvalidTaskException('key', 'must be 1 to 191 characters long');
            }
        }
        if ($maxAttempts !== null && ($maxAttempts < 1 || $maxAttempts > 1000)) {
            throw new InvalidTaskException('maxAttempts', 'must be >= 1 and <= 1000');
        }
        if ($misfire !== null && $misfire !== 'run' && $misfire !== 'skip') {
            throw new InvalidTaskException('misfire', 'must be one of "run", "skip"');
        }
        $zone = $timezone === null ? null : self::canonicalZone($timezone);
        if ($timezone !== null && $zone === null) {
            throw new InvalidTaskException('timezone', 'must be an IANA time zone such as Asia/Shanghai, got ' . json_encode($timezone));
        }
        if ($runAt !== null && $delayMs !== null) {
            throw new InvalidTaskException('runAt', 'and delayMs cannot both be given');
        }
        if ($runAt === null && $delayMs === null) {
            throw new InvalidTaskException('runAt', 'or delayMs is required');
        }
        if ($delayMs !== null && ($delayMs < 0 || $delayMs > self::TEN_YEARS_MS)) {
            throw new InvalidTaskException('delayMs', 'must be >= 0 and <= ' . self::TEN_YEARS_MS);
        }
        $runAtMs = $runAt === null ? null : self::instant($runAt, $zone, $nowMs);
        return [
            'type' => $type,
            'payload' => $json,
            'timezone' => $zone ?? self::zoneOfOffset($runAt),
            'key' => $key,
            'maxAttempts' => $maxAttempts,
            'misfire' => $misfire,
            'runAtMs' => $runAtMs,
            'delayMs' => $delayMs,
        ];
    }

    /**
     * The zone of a task whose runAt carries an offset and that names no zone, as the API picks it
     * (src/time/zones.ts, zoneOfOffset): a whole-hour offset's fixed zone, else UTC.
     */
    private static function zoneOfOffset(int|string|\DateTimeInterface|null $runAt): string
    {
        if ($runAt instanceof \DateTimeInterface) {
            $seconds = $runAt->getOffset();
        } elseif (is_string($runAt) && preg_match('/\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?([+-])(\d{2})(?::?(\d{2}))?$/', trim($runAt), $m)) {
            $seconds = ((int) $m[2] * 3600 + (int) ($m[3] ?? 0) * 60) * ($m[1] === '-' ? -1 : 1);
        } else {
            return 'UTC';
        }
        $hours = intdiv($seconds, 3600);
        if ($seconds === 0 || $seconds % 3600 !== 0 || $hours > 14 || $hours < -12) {
            return 'UTC';
        }
        return 'Etc/GMT' . ($hours > 0 ? '-' : '+') . abs($hours);
    }

    /** The instant (epoch ms) `runAt` names, as punctual's parseRunAt reads it. */
    private static function instant(int|string|\DateTimeInterface $runAt, ?string $zone, int $nowMs): int
    {
        if ($runAt instanceof \DateTimeInterface) {
            $ms = (int) $runAt->format('U') * 1000 + (int) $runAt->format('v');
        } elseif (is_int($runAt)) {
            if ($runAt < self::SMALLEST_EPOCH_MS) {
                throw new InvalidTaskException('runAt', "{$runAt} looks like epoch seconds; send epoch milliseconds");
            }
            $ms = $runAt;
        } else {
            $ms = self::parseIso($runAt, $zone);
        }
        if ($ms < 0) {
            throw new InvalidTaskException('runAt', 'must not be before 1970-01-01T00:00:00Z');
        }
        if ($ms > self::latestRunAt($nowMs)) {
            throw new InvalidTaskException('runAt', 'must not be more than ' . self::MAX_YEARS_AHEAD . ' years ahead');
        }
        return $ms;
    }

    private static function parseIso(string $text, ?string $zone): int
    {
        $value = trim($text);
        if ($value === '' || strlen($value) > 64) {
            throw new InvalidTaskException('runAt', 'must be an ISO-8601 date-time');
        }
        if (str_contains($value, '[')) {
            throw new InvalidTaskException('runAt', 'zone annotations such as [Asia/Shanghai] are not accepted; use the timezone field');
        }
        if (preg_match('/^\d+$/', $value)) {
            throw new InvalidTaskException('runAt', 'a string must be an ISO-8601 date-time; send epoch milliseconds as a JSON integer');
        }
        $pattern = '/^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?$/';
        if (!preg_match($pattern, $value, $m)) {
            throw self::notIso($value);
        }
        [$year, $month, $day] = [(int) $m[1], (int) $m[2], (int) $m[3]];
        $hour = (int) ($m[4] ?? 0);
        $minute = (int) ($m[5] ?? 0);
        // Temporal reads a leap second :60 as :59.
        $second = min((int) ($m[6] ?? 0), 59);
        $milli = (int) substr(str_pad($m[7] ?? '', 3, '0'), 0, 3);
        if (!checkdate($month, $day, $year) || $hour > 23 || $minute > 59 || (int) ($m[6] ?? 0) > 60) {
            throw self::notIso($value);
        }
        $hasTime = ($m[4] ?? '') !== '';
        $wall = sprintf('%04d-%02d-%02dT%02d:%02d:%02d', $year, $month, $day, $hour, $minute, $second);
        if (($m[8] ?? '') !== '' || ($m[9] ?? '') !== '') {
            if (!$hasTime) {
                throw self::notIso($value);
            }
            $offset = ($m[8] ?? '') !== '' ? 0 : ((int) $m[10] * 3600 + (int) ($m[11] ?? 0) * 60) * ($m[9] === '-' ? -1 : 1);
            $utc = new \DateTimeImmutable($wall, new \DateTimeZone('UTC'));
            return ($utc->getTimestamp() - $offset) * 1000 + $milli;
        }
        if ($zone === null) {
            throw new InvalidTaskException('runAt', 'is a naive local time: give timezone too (the service\'s TIMEZONE is not known to the shop\'s database)');
        }
        // PHP resolves DST like Temporal's "compatible": a time in the spring-forward gap moves
        // forward by the gap, one in the fall-back overlap is the earlier of the two.
        $local = new \DateTimeImmutable($wall, new \DateTimeZone($zone));
        return $local->getTimestamp() * 1000 + $milli;
    }

    private static function notIso(string $value): InvalidTaskException
    {
        return new InvalidTaskException('runAt', json_encode($value, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES) . ' is not an ISO-8601 date-time (e.g. 2026-12-01T10:00:00+08:00 or 2026-12-01 10:00:00)');
    }

    /** Ten calendar years after now, in UTC (29 February falls back to the 28th, as in Temporal). */
    private static function latestRunAt(int $nowMs): int
    {
        $now = (new \DateTimeImmutable('@' . intdiv($nowMs, 1000)))->setTimezone(new \DateTimeZone('UTC'));
        [$year, $month, $day] = [(int) $now->format('Y') + self::MAX_YEARS_AHEAD, (int) $now->format('n'), (int) $now->format('j')];
        if (!checkdate($month, $day, $year)) {
            $day = 28;
        }
        $later = $now->setDate($year, $month, $day);
        return $later->getTimestamp() * 1000 + $nowMs % 1000;
    }

    /** The IANA zone `name` stands for, in its canonical spelling, or null. Offsets and abbreviations are refused. */
    private static function canonicalZone(string $name): ?string
    {
        if ($name === '' || strlen($name) > 64 || preg_match('/^[+-]/', $name) || strcasecmp($name, 'z') === 0) {
            return null;
        }
        foreach (\DateTimeZone::listIdentifiers(\DateTimeZone::ALL_WITH_BC) as $identifier) {
            if (strcasecmp($identifier, $name) === 0) {
                return $identifier;
            }
        }
        return null;
    }

    private static function depthProblem(array $payload): ?string
    {
        $stack = [[$payload, 0]];
        while ($stack !== []) {
            [$value, $depth] = array_pop($stack);
            if (!is_array($value) && !is_object($value)) {
                continue;
            }
            if ($depth >= self::MAX_PAYLOAD_DEPTH) {
                return 'must not nest more than ' . self::MAX_PAYLOAD_DEPTH . ' levels deep';
            }
            foreach ((array) $value as $child) {
                $stack[] = [$child, $depth + 1];
            }
        }
        return null;
    }

    /** close_order's payload schema: { orderSn: string of 1 to 64 characters }, nothing else. */
    private static function checkCloseOrder(array $payload): void
    {
        $extra = array_diff(array_keys($payload), ['orderSn']);
        if ($extra !== []) {
            throw new InvalidTaskException('payload', 'must not have additional properties (' . implode(', ', $extra) . ')');
        }
        if (!array_key_exists('orderSn', $payload)) {
            throw new InvalidTaskException('payload', 'must have required properties orderSn');
        }
        if (!is_string($payload['orderSn'])) {
            throw new InvalidTaskException('payload/orderSn', 'must be string');
        }
        $length = self::characters($payload['orderSn']);
        if ($length < 1 || $length > 64) {
            throw new InvalidTaskException('payload/orderSn', 'must be 1 to 64 characters long');
        }
    }

    /** The key is taken: the same task again answers its id, anything else is a conflict. */
    private static function sameTask(\PDO $pdo, string $table, array $row): int
    {
        $statement = $pdo->prepare("SELECT id, type, payload, cron, DATE_FORMAT(run_at, '%Y-%m-%d %H:%i:%s.%f') AS run_at, DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f') AS created_at FROM {$table} WHERE task_key = ?");
        $statement->execute([$row['key']]);
        $existing = $statement->fetch(\PDO::FETCH_ASSOC);
        if ($existing === false) {
            throw new \PDOException("INSERT INTO {$table} met a duplicate key, but no task has key {$row['key']}");
        }
        $runAt = self::utcMs($existing['run_at']);
        $asked = $row['delayMs'] !== null ? self::utcMs($existing['created_at']) + $row['delayMs'] : $row['runAtMs'];
        $same = $existing['type'] === $row['type']
            && $existing['cron'] === null
            && $runAt === $asked
            && self::canonical(json_decode((string) $existing['payload'], true)) === self::canonical(json_decode($row['payload'], true));
        if (!$same) {
            throw new KeyConflictException(
                'key ' . json_encode($row['key'], JSON_UNESCAPED_UNICODE) . " already names task {$existing['id']} with a different type, payload, runAt or cron",
                (int) $existing['id'],
            );
        }
        return (int) $existing['id'];
    }

    private static function canonical(mixed $value): mixed
    {
        if (!is_array($value)) {
            return $value;
        }
        if (!array_is_list($value)) {
            ksort($value, SORT_STRING);
        }
        return array_map([self::class, 'canonical'], $value);
    }

    /** Characters in a UTF-8 string (ext-mbstring is not required), or null when it is not UTF-8. */
    private static function characters(string $text): ?int
    {
        $count = preg_match_all('/./su', $text);
        return $count === false ? null : $count;
    }

    private static function utcText(int $ms): string
    {
        return gmdate('Y-m-d H:i:s', intdiv($ms, 1000)) . sprintf('.%03d', $ms % 1000);
    }

    private static function utcMs(string $text): int
    {
        $time = new \DateTimeImmutable($text, new \DateTimeZone('UTC'));
        return $time->getTimestamp() * 1000 + (int) $time->format('v');
    }
}
