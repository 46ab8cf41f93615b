<?php

declare(strict_types=1);

// The tests talk to a real punctual and MariaDB that `npm run test:php` starts; they say so
// instead of failing obscurely when run without them.
require __DIR__ . '/../vendor/autoload.php';

foreach (['PUNCTUAL_URL', 'PUNCTUAL_TOKEN', 'PUNCTUAL_DSN', 'PUNCTUAL_DOWN_URL', 'PUNCTUAL_WEBHOOK_SECRET', 'PUNCTUAL_WEBHOOK_SECRET_NEXT', 'PUNCTUAL_WEBHOOK_HOST', 'PUNCTUAL_WEBHOOK_HOST_SECRET'] as $name) {
    if (getenv($name) === false) {
        fwrite(STDERR, "{$name} is not set: run these tests with `npm run test:php` from the project root\n");
        exit(1);
    }
}
