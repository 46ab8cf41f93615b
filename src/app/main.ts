/**
 * The entry point: read the configuration, start the service, stop cleanly on SIGTERM/SIGINT
 * (exit 0). A signal repeated within SAME_STOP_MS of the first is the same stop: `npm start`
 * forwards to its child the signal a terminal or a process manager sent to the whole group, so
 * the service gets it twice at once. A signal later than that while stopping forces the exit. `npm start` and the `punctual`
 * command reach it through bin/punctual.mjs, which first makes sure this file is built from the
 * current sources, in the same process, so the signal a supervisor sends arrives here.
 */
import { ConfigError, loadConfig } from './config.js';
import { loggable } from '../db/errors.js';
import { redactCredentials } from '../observability/redact.js';
import { Service } from './service.js';
import { describeStartError } from './start-errors.js';

let config;
try {
  config = loadConfig(process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`punctual: bad configuration: ${redactCredentials(error.message)}\n`);
  process.exit(1);
}

const service = new Service(config);

/** A signal this soon after the first is the first one again (forwarded by npm), not a call to hurry. */
const SAME_STOP_MS = 1000;
let firstSignalAt: number | undefined;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (firstSignalAt !== undefined) {
      if (Date.now() - firstSignalAt < SAME_STOP_MS) {
        service.log.info({ signal }, 'the same signal again at once (forwarded): the stop goes on');
        return;
      }
      service.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    firstSignalAt = Date.now();
    service.log.info({ signal }, 'stopping');
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        service.log.error({ err: loggable(error) }, 'stop failed');
        process.exit(1);
      },
    );
  });
}

// A bug must not take the timers down with it: log it and go on.
process.on('unhandledRejection', (reason) => service.log.error({ err: loggable(reason) }, 'unhandled rejection'));

try {
  await service.start();
} catch (error) {
  // A signal while booting: the stop it started ends the process (exit 0).
  if (!service.stopping) {
    // One line naming the setting at fault; the stack only for whoever asked for it.
    if (config.service.logLevel === 'debug' || config.service.logLevel === 'trace') {
      service.log.fatal({ err: loggable(error) }, 'punctual could not start');
    }
    process.stderr.write(`punctual: cannot start: ${describeStartError(error, config)}\n`);
    await service.stop().catch(() => undefined);
    process.exit(1);
  }
}
