/**
 * pino: JSON lines by default, pretty only on a terminal. Secrets never reach the log: the
 * authorization header and anything named like a token or secret is redacted.
 */
import { pino, type DestinationStream, type Logger } from 'pino';

/** `destination`: where the lines go (a test's capture); stdout by default. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
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
    transport:
      destination === undefined && process.stdout.isTTY ? { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } : undefined,
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}

/**
 * `log` without the redaction, for lines whose fields are all punctual's own and none of them
 * named like a secret (a task run's outcome: ids, times, its key and error as printable text).
 * Redaction walks every line's keys for the secret paths: about 6 µs of the 15 a line costs,
 * at every run of every task.
 */
export function withoutRedaction(log: Logger): Logger {
  return log.child({}, { redact: { paths: [] } });
}
