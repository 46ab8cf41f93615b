<?php

declare(strict_types=1);

namespace Punctual\Tests\Support;

/**
 * A shop's webhook receiver: PHP's built-in server running fixtures/receiver.php on a free port,
 * with a spool directory where it records every request it got. Stopped by stop() (and by the
 * destructor, so a failed test leaves no process behind).
 */
final class Receiver
{
    /** @var resource */
    private $process;
    public readonly string $baseUrl;
    public readonly string $spool;

    /** @param string $host the loopback address to listen on (127.0.0.2: a host with its own key) */
    public function __construct(array $env = [], string $host = '127.0.0.1')
    {
        $this->spool = sys_get_temp_dir() . '/punctual-receiver-' . bin2hex(random_bytes(4));
        mkdir($this->spool);
        $port = self::freePort($host);
        $this->baseUrl = "http://{$host}:{$port}";
        $this->process = proc_open(
            [PHP_BINARY, '-S', "{$host}:{$port}", __DIR__ . '/../fixtures/receiver.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->spool . '.log', 'a'], 2 => ['file', $this->spool . '.log', 'a']],
            $pipes,
            null,
            array_merge(getenv(), $env, ['RECEIVER_SPOOL' => $this->spool, 'PHP_CLI_SERVER_WORKERS' => '4']),
        );
        $deadline = microtime(true) + 10;
        while (@fsockopen($host, $port) === false) {
            if (microtime(true) > $deadline) {
                throw new \RuntimeException('the receiver did not start: ' . @file_get_contents($this->spool . '.log'));
            }
            usleep(20_000);
        }
    }

    /** The requests recorded under `name`, oldest first. */
    public function requests(string $name): array
    {
        $files = glob("{$this->spool}/{$name}.*.json") ?: [];
        sort($files, SORT_NATURAL);
        return array_map(static fn (string $file) => json_decode((string) file_get_contents($file), true), $files);
    }

    public function stop(): void
    {
        if (is_resource($this->process)) {
            // The built-in server's workers outlive a stopped master: stop them first, by pid.
            $pid = proc_get_status($this->process)['pid'];
            $children = preg_split('/\s+/', trim((string) @file_get_contents("/proc/{$pid}/task/{$pid}/children")), -1, PREG_SPLIT_NO_EMPTY);
            foreach ($children as $child) {
                posix_kill((int) $child, 15); // SIGTERM
            }
            proc_terminate($this->process);
            proc_close($this->process);
            self::remove($this->spool);
            @unlink($this->spool . '.log');
        }
    }

    public function __destruct()
    {
        $this->stop();
    }

    private static function remove(string $path): void
    {
        foreach (glob("{$path}/*") ?: [] as $child) {
            is_dir($child) ? self::remove($child) : @unlink($child);
        }
        @rmdir($path);
    }

    private static function freePort(string $host): int
    {
        $socket = stream_socket_server("tcp://{$host}:0");
        $port = (int) substr(strrchr(stream_socket_get_name($socket, false), ':'), 1);
        fclose($socket);
        return $port;
    }
}
