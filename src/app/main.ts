/**
 * The entry point: read the configuration, start the service, stop cleanly on SIGTERM/SIGINT
 * (exit 0). A second signal while stopping forces the exit. `npm start` and the `punctual`
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

let signals = 0;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    signals++;
    if (signals > 1) {
      service.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
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
