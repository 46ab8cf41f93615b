<?php

declare(strict_types=1);

namespace Punctual\Tests\Support;

/**
 * The PHP reading of the conformance cases (clients/conformance/cases.json, whose `about` says
 * what a step, a reference and a matcher are), as the TypeScript, Python and Go runners read the
 * same file: steps run through an adapter that calls the PHP client, answers are held against
 * what the case expects.
 *
 * What it decides: JSON objects and lists are PHP arrays, told apart with array_is_list (an
 * empty one is a list); numbers compare as numbers (1 == 1.0), everything else strictly; a
 * mismatch fails the case with the step, the path in the answer and both values; `until` polls
 * every 100 ms up to `within` (15 s); `received` is read from the receiver here, it is not a
 * client's call.
 */
final class CaseRun
{
    private const POLL_US = 100_000;
    private const DEFAULT_WITHIN_MS = 15_000;
    private const REFERENCE = '/^\$([A-Za-z_]\w*)((?:\.[^.]+)*)$/';

    /** @var array<string, mixed> */
    private array $saved = [];

    /**
     * @param array<string, mixed> $case
     * @param array{run: string, receiver: string, secret: string} $placeholders
     * @param \Closure(string $call, array<string, mixed> $args): mixed $call the client's answer as JSON-like arrays
     * @param \Closure(\Throwable $error): ?array<string, mixed> $error the client's API error as the cases see it, null for anything else
     */
    public function __construct(
        private readonly array $case,
        private readonly array $placeholders,
        private readonly \Closure $call,
        private readonly \Closure $error,
    ) {
    }

    /** Runs every step; throws a CaseFailed on the first that does not answer as expected. */
    public function run(): void
    {
        foreach ($this->case['steps'] as $index => $step) {
            $label = sprintf('%s, step %d (%s)', $this->case['name'], $index + 1, $step['call']);
            $answer = $this->step($step, $label);
            if (isset($step['save'])) {
                $this->saved[$step['save']] = $answer;
            }
        }
    }

    private function step(array $step, string $label): mixed
    {
        $args = $this->resolve($step['with'] ?? []);
        $call = fn () => $step['call'] === 'received' ? $this->received((string) $args['name']) : ($this->call)($step['call'], $args);
        if (array_key_exists('expectError', $step)) {
            try {
                $answer = $call();
            } catch (\Throwable $thrown) {
                $view = ($this->error)($thrown);
                if ($view === null) {
                    throw $thrown;
                }
                $this->check($label, $step['expectError'], $view);
                return $view;
            }
            throw new CaseFailed("{$label}: expected an error, got " . self::show($answer));
        }
        $answer = $call();
        if (array_key_exists('until', $step)) {
            $until = $this->resolve($step['until']);
            $within = $step['within'] ?? self::DEFAULT_WITHIN_MS;
            $deadline = microtime(true) + $within / 1000;
            while ($this->mismatches($until, $answer) !== []) {
                if (microtime(true) > $deadline) {
                    $this->check("{$label}, still after {$within} ms", $step['until'], $answer);
                }
                usleep(self::POLL_US);
                $answer = $call();
            }
        }
        if (array_key_exists('expect', $step)) {
            $this->check($label, $step['expect'], $answer);
        }
        return $answer;
    }

    private function check(string $label, mixed $expected, mixed $answer): void
    {
        $problems = $this->mismatches($this->resolve($expected), $answer);
        if ($problems !== []) {
            throw new CaseFailed("{$label}:\n  " . implode("\n  ", $problems));
        }
    }

    /** The value with placeholders replaced in its strings and references to saved answers taken. */
    private function resolve(mixed $value): mixed
    {
        if (is_string($value)) {
            if (preg_match(self::REFERENCE, $value, $reference)) {
                return $this->lookup($reference[1], $reference[2]);
            }
            return strtr($value, ['{run}' => $this->placeholders['run'], '{receiver}' => $this->placeholders['receiver'], '{secret}' => $this->placeholders['secret']]);
        }
        return is_array($value) ? array_map(fn ($item) => $this->resolve($item), $value) : $value;
    }

    private function lookup(string $name, string $path): mixed
    {
        if (!array_key_exists($name, $this->saved)) {
            throw new CaseFailed("the case refers to \${$name}, which no earlier step saved");
        }
        $value = $this->saved[$name];
        foreach (array_slice(explode('.', $path), 1) as $segment) {
            if (!is_array($value) || !array_key_exists($segment, $value)) {
                throw new CaseFailed("\${$name}{$path}: the saved answer has no {$segment}");
            }
            $value = $value[$segment];
        }
        return $value;
    }

    /** @return list<string> where `actual` differs from `expected`, one line each */
    private function mismatches(mixed $expected, mixed $actual, string $at = ''): array
    {
        $here = $at === '' ? 'the answer' : $at;
        if (is_array($expected) && !array_is_list($expected)) {
            if (array_filter(array_keys($expected), static fn ($key) => str_starts_with((string) $key, '$')) !== []) {
                return $this->operator($expected, $actual, $here);
            }
            if (!self::isObject($actual)) {
                return ["{$here}: expected an object, got " . self::show($actual)];
            }
            $problems = [];
            foreach ($expected as $key => $item) {
                $path = $at === '' ? (string) $key : "{$at}.{$key}";
                if (!array_key_exists($key, $actual)) {
                    $problems[] = "{$path}: missing from the answer";
                    continue;
                }
                array_push($problems, ...$this->mismatches($item, $actual[$key], $path));
            }
            return $problems;
        }
        if (is_array($expected)) {
            if (!is_array($actual) || !array_is_list($actual)) {
                return ["{$here}: expected an array, got " . self::show($actual)];
            }
            if (count($actual) !== count($expected)) {
                return ["{$here}: expected " . count($expected) . ' items, got ' . count($actual) . ': ' . self::show($actual)];
            }
            $problems = [];
            foreach ($expected as $index => $item) {
                array_push($problems, ...$this->mismatches($item, $actual[$index], "{$at}.{$index}"));
            }
            return $problems;
        }
        $same = (is_int($expected) || is_float($expected)) && (is_int($actual) || is_float($actual)) ? $expected == $actual : $expected === $actual;
        return $same ? [] : ["{$here}: expected " . self::show($expected) . ', got ' . self::show($actual)];
    }

    private function operator(array $expected, mixed $actual, string $here): array
    {
        $operator = (string) array_key_first($expected);
        $operand = $expected[$operator];
        $fail = static fn (string $what) => ["{$here}: expected {$what}, got " . self::show($actual)];
        switch ($operator) {
            case '$type':
                return self::typeOf($actual) === $operand || ($operand === 'number' && is_int($actual)) ? [] : $fail("a value of type {$operand}");
            case '$matches':
                $pattern = '/' . str_replace('/', '\/', (string) $operand) . '/u';
                return is_string($actual) && preg_match($pattern, $actual) === 1 ? [] : $fail("a string matching {$pattern}");
            case '$contains':
                return is_string($actual) && str_contains($actual, (string) $operand) ? [] : $fail('a string containing ' . self::show($operand));
            case '$length':
                return is_array($actual) && array_is_list($actual) && count($actual) === $operand ? [] : $fail("{$operand} items");
            case '$not':
                return $this->mismatches($operand, $actual) !== [] ? [] : $fail('anything but ' . self::show($operand));
            default:
                throw new CaseFailed("unknown matcher {$operator}");
        }
    }

    private static function isObject(mixed $value): bool
    {
        return is_array($value) && ($value === [] || !array_is_list($value));
    }

    private static function typeOf(mixed $value): string
    {
        return match (true) {
            $value === null => 'null',
            is_bool($value) => 'boolean',
            is_int($value) => 'integer',
            is_float($value) => 'number',
            is_string($value) => 'string',
            is_array($value) && array_is_list($value) && $value !== [] => 'array',
            default => 'object',
        };
    }

    private function received(string $name): array
    {
        $text = file_get_contents($this->placeholders['receiver'] . '/received/' . rawurlencode($name));
        if ($text === false) {
            throw new CaseFailed("the receiver did not answer for {$name}");
        }
        return json_decode($text, true, 512, JSON_THROW_ON_ERROR);
    }

    private static function show(mixed $value): string
    {
        return json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION) ?: var_export($value, true);
    }
}
