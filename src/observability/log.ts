/**
 * pino: JSON lines by default, pretty only on a terminal. Secrets never reach the log: the
 * authorization header and anything named like a token or secret is redacted.
 */
import { pino, type Logger } from 'pino';

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'punctual', pid: process.pid },
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'authorization',
        '*.apiToken',
        '*.webhookSecret',
        '*.webhookSecretNext',
        'apiToken',
        'webhookSecret',
        'webhookSecretNext',
      ],
      censor: '[redacted]',
    },
    transport: process.stdout.isTTY ? { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } : undefined,
  });
}
