<?php

declare(strict_types=1);

namespace Punctual;

use Punctual\Exception\ApiException;
use Punctual\Exception\ConnectionException;

/**
 * The worker loop behind Client::work(): leases one task of the given worker types at a time
 * (waiting for one, long poll), runs the callback on it, and settles it: a return acks, a throw
 * nacks with the exception's message (retried with backoff), a PermanentFailure nacks as
 * permanent (failed for good).
 *
 * What it decides:
 * - With pcntl, the lease is extended while the callback runs (SIGALRM every third of the lease,
 *   on a connection of its own, so the callback's own calls are never interleaved), and SIGTERM
 *   and SIGINT stop the loop between tasks: the task at hand is finished and settled first, a
 *   lease request that is waiting is given up at once. The previous handlers are put back after.
 *   Without pcntl, a callback that runs longer than the lease should call $extend itself.
 * - A lease or settle that fails (punctual restarting, the network) is reported to `onError` and
 *   tried again after a pause: a task whose settle was lost comes back when its lease runs out
 *   (at least once; the idempotency key is the same).
 */
final class Worker
{
    private bool $stopping = false;

    /**
     * @param list<string> $types
     * @param callable(LeasedTask $task, callable(): void $extend): mixed $handle
     * @param null|callable(\Throwable $error): void $onError
     */
    public function __construct(
        private readonly Client $client,
        private readonly Client $extender,
        private readonly array $types,
        private $handle,
        private readonly int $leaseMs,
        private readonly int $waitMs,
        private readonly ?int $maxTasks,
        private $onError,
    ) {
    }

    /** @return int how many tasks it handled */
    public function run(): int
    {
        $signals = function_exists('pcntl_async_signals') && function_exists('pcntl_signal');
        $previous = [];
        $async = false;
        if ($signals) {
            $async = pcntl_async_signals(true);
            foreach ([SIGTERM, SIGINT] as $signal) {
                $previous[$signal] = pcntl_signal_get_handler($signal);
                pcntl_signal($signal, function (): void {
                    $this->stopping = true;
                });
            }
        }
        $handled = 0;
        try {
            while (!$this->stopping && ($this->maxTasks === null || $handled < $this->maxTasks)) {
                try {
                    $tasks = $this->client->leaseUnless($this->types, 1, $this->leaseMs, $this->waitMs, fn (): bool => $this->stopping);
                } catch (ConnectionException | ApiException $error) {
                    if ($this->stopping) {
                        break;
                    }
                    $this->report($error);
                    $this->pause(1000);
                    continue;
                }
                foreach ($tasks as $task) {
                    $this->runOne($task, $signals);
                    $handled++;
                }
            }
        } finally {
            if ($signals) {
                foreach ($previous as $signal => $handler) {
                    pcntl_signal($signal, $handler ?? SIG_DFL);
                }
                pcntl_async_signals($async);
            }
        }
        return $handled;
    }

    private function runOne(LeasedTask $task, bool $signals): void
    {
        $extend = function () use ($task): void {
            try {
                $this->extender->extend($task, $this->leaseMs);
            } catch (\Throwable $error) {
                $this->report($error);
            }
        };
        $every = max(1, intdiv($this->leaseMs, 3000));
        $alarm = $signals && function_exists('pcntl_alarm');
        if ($alarm) {
            pcntl_signal(SIGALRM, function () use ($extend, $every): void {
                $extend();
                pcntl_alarm($every);
            });
            pcntl_alarm($every);
        }
        $failure = null;
        try {
            ($this->handle)($task, $extend);
        } catch (\Throwable $error) {
            $failure = $error;
        } finally {
            if ($alarm) {
                pcntl_alarm(0);
                pcntl_signal(SIGALRM, SIG_DFL);
            }
        }
        try {
            if ($failure === null) {
                $this->client->ack($task);
            } else {
                $message = $failure->getMessage() !== '' ? $failure->getMessage() : get_class($failure);
                $this->client->nack($task, $message, null, $failure instanceof PermanentFailure);
            }
        } catch (\Throwable $error) {
            // The lease was lost (it ran out: another worker has the task) or punctual is away.
            $this->report($error);
        }
    }

    private function report(\Throwable $error): void
    {
        if ($this->onError !== null) {
            ($this->onError)($error);
        }
    }

    /** Sleeps `ms`, waking early when a stop was asked. */
    private function pause(int $ms): void
    {
        $until = microtime(true) + $ms / 1000;
        while (!$this->stopping && microtime(true) < $until) {
            usleep(50_000);
        }
    }
}
