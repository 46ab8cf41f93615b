/**
 * punctual as a library: `import { createPunctual } from 'punctual'`, for a Node shop that keeps
 * its handlers in its own repository (graphile-worker's run()). The same service as `npm start`:
 * the configuration is the environment's variables as an object (read and checked by the same
 * table, docs/configuration.md), `handlers` the same plain objects a handler module exports.
 * Nothing here reads process.env or installs signal handlers: the host program owns the process.
 */
import type { Logger } from 'pino';
import type { TSchema } from 'typebox';
import type { HandlerDefinition } from '../contract/handler-module.js';
import { loadConfig } from './config.js';
import type { VariableName } from './config-table.js';
import { Service } from './service.js';

export { defineHandler, PermanentFailure } from '../contract/handler-module.js';
export type * from '../contract/handler-module.js';
export { ConfigError } from './config.js';
export { HandlerModuleError } from '../handlers/modules.js';
export { ProcedureError } from '../handlers/procedure.js';

/** The configuration by variable name (`DATABASE_URL`, `PORT`, …), plus the shop's handlers. */
export type PunctualOptions = { [Name in VariableName]?: string | number | boolean } & {
  /** Handlers as plain objects ({ type, effect, payload, run }); defineHandler types them. */
  handlers?: readonly HandlerDefinition<TSchema>[];
  /** A pino logger of the host program's; default punctual's own JSON log on stdout. */
  logger?: Logger;
};

export interface Punctual {
  /** Loads the handlers, listens, migrates, arms the pending tasks; answers the URL it serves. */
  start(): Promise<string>;
  /** The clean stop (running handlers finish, up to STOP_TIMEOUT_MS). Safe to call twice. */
  stop(): Promise<void>;
  /** Where it listens, once started (`http://127.0.0.1:3000`); undefined before. */
  readonly url: string | undefined;
}

/** A punctual service. A bad setting throws a ConfigError naming the variable, at once. */
export function createPunctual(options: PunctualOptions = {}): Punctual {
  const { handlers, logger, ...settings } = options;
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(settings)) if (value !== undefined) env[name] = String(value);
  const service = new Service(loadConfig(env), { handlers, logger });
  let url: string | undefined;
  return {
    async start() {
      url = await service.start();
      return url;
    },
    stop: () => service.stop(),
    get url() {
      return url;
    },
  };
}
