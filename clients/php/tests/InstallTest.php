<?php

declare(strict_types=1);

namespace Punctual\Tests;

use Punctual\Tests\Support\ServiceTestCase;

/**
 * A shop installs the client with Composer, as its own project would: an empty project that
 * requires `punctual/client` from this folder (a path repository, Packagist off, so it runs
 * offline), `composer install`, then a script of the shop's that loads only Composer's autoloader
 * and creates a task through the service the suite started. What the shop gets is a copy of the
 * package, not this checkout.
 */
final class InstallTest extends ServiceTestCase
{
    public function testAShopProjectInstallsTheClientWithComposerAndCreatesATask(): void
    {
        $project = sys_get_temp_dir() . '/punctual-shop-' . bin2hex(random_bytes(4));
        mkdir($project);
        try {
            file_put_contents($project . '/composer.json', json_encode([
                'name' => 'shop/checkout',
                'require' => ['punctual/client' => '*@dev'],
                'repositories' => [
                    ['type' => 'path', 'url' => realpath(__DIR__ . '/..'), 'options' => ['symlink' => false]],
                    ['packagist.org' => false],
                ],
            ], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
            $env = array_merge(getenv(), ['COMPOSER_HOME' => $project . '/.composer', 'COMPOSER_NO_INTERACTION' => '1']);
            [$code, $output] = self::runCommand(['composer', 'install', '--no-progress', '--no-interaction'], $project, $env);
            self::assertSame(0, $code, $output);
            self::assertFileExists($project . '/vendor/punctual/client/src/Client.php');
            self::assertFalse(is_link($project . '/vendor/punctual/client'), 'a copy, as from a registry');

            $sn = self::unique('INSTALL-');
            file_put_contents($project . '/close.php', <<<'PHP'
                <?php
                require __DIR__ . '/vendor/autoload.php';
                $client = new Punctual\Client(getenv('PUNCTUAL_URL'), getenv('PUNCTUAL_TOKEN'));
                $created = $client->create('close_order', ['orderSn' => $argv[1]], delayMs: 3_600_000, key: "close_order:{$argv[1]}");
                echo $created->task->id, "\n";
                PHP);
            [$code, $output] = self::runCommand([PHP_BINARY, 'close.php', $sn], $project, $env);
            self::assertSame(0, $code, $output);
            $id = (int) trim($output);
            $task = self::client()->get($id);
            self::assertSame("close_order:{$sn}", $task->key);
            self::assertSame('pending', $task->status);
            self::client()->cancel($id);
        } finally {
            self::runCommand(['rm', '-rf', $project], sys_get_temp_dir(), getenv());
        }
    }

    /** @return array{0: int, 1: string} the exit code and what it printed (stdout and stderr) */
    private static function runCommand(array $command, string $cwd, array $env): array
    {
        $process = proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes, $cwd, $env);
        $output = (string) stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        return [proc_close($process), $output];
    }
}
