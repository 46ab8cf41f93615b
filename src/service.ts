/**
 * The composition root: builds every part from the configuration and runs the boot and the
 * shutdown in the order that keeps tasks safe.
 *
 * Boot: database → migrations → pool → scheduler boot load → listen.
 * Stop: stop accepting requests → stop the refill and disarm the timers → let running handlers
 * finish (up to STOP_TIMEOUT_MS) → close the pool.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { Database, ensureDatabase } from './db/connection.js';
import { migrateDatabase } from './db/migrate.js';
import { createRegistry, type HandlerRegistry } from './handlers/registry.js';
import { buildApp } from './http/app.js';
import { securityOptions } from './http/security.js';
import { createLogger } from './log.js';
import { Metrics } from './metrics.js';
import { Dispatcher } from './scheduler/dispatcher.js';
import { Scheduler } from './scheduler/scheduler.js';
import { Timers } from './scheduler/timers.js';
import { TaskStore } from './store/task-store.js';

export interface ServiceOptions {
  clock?: Clock;
  logger?: Logger;
  registry?: HandlerRegistry;
}

export class Service {
  readonly database: Database;
  readonly store: TaskStore;
  readonly registry: HandlerRegistry;
  readonly timers: Timers;
  readonly dispatcher: Dispatcher;
  readonly scheduler: Scheduler;
  readonly app: FastifyInstance;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** This process in lease_owner: host, pid and a random tag. */
  readonly owner = `${hostname().slice(0, 40)}:${process.pid}:${randomBytes(4).toString('hex')}`;
  #stopping: Promise<void> | undefined;

  /** Builds the parts; touches no database until start(). */
  constructor(
    readonly config: Config,
    options: ServiceOptions = {},
  ) {
    const clock = options.clock ?? systemClock;
    this.log = options.logger ?? createLogger(config.logLevel);
    this.database = Database.fromConfig(config);
    this.store = new TaskStore(this.database);
    this.registry = options.registry ?? createRegistry(config);
    this.metrics = new Metrics({
      armed: () => this.timers.size,
      pool: () => this.database.usage,
      pendingByType: () => this.store.countPendingByType(),
    });
    let scheduler: Scheduler | undefined;
    this.dispatcher = new Dispatcher({
      database: this.database,
      store: this.store,
      registry: this.registry,
      clock,
      log: this.log,
      concurrency: config.concurrency,
      batchSize: config.batchSize,
      retry: { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs },
      owner: this.owner,
      metrics: this.metrics,
      arm: (id, at) => scheduler?.track(id, at),
    });
    this.timers = new Timers(clock, (id) => this.dispatcher.enqueue(id));
    scheduler = new Scheduler({
      store: this.store,
      clock,
      log: this.log,
      timers: this.timers,
      dispatcher: this.dispatcher,
      horizonMs: config.horizonMs,
      refillIntervalMs: config.refillIntervalMs,
      reconcileIntervalMs: config.reconcileIntervalMs,
      misfireGraceMs: config.misfireGraceMs,
      metrics: this.metrics,
    });
    this.scheduler = scheduler;
    this.app = buildApp({
      logger: this.log,
      apiToken: config.apiToken,
      metrics: this.metrics,
      tasks: {
        store: this.store,
        registry: this.registry,
        tracker: scheduler,
        clock,
        timezone: config.timezone,
        maxAttempts: config.maxAttempts,
        armed: () => this.timers.size,
      },
      security: securityOptions(config),
      health: {
        booted: () => scheduler.booted,
        databaseUp: () => this.database.ping(),
        armed: () => this.timers.size,
      },
    });
  }

  /** Creates the database if missing, migrates, loads and arms the pending tasks. */
  async boot(): Promise<void> {
    const { config } = this;
    await ensureDatabase(config.databaseUrl, config.databaseName);
    await migrateDatabase(config.databaseUrl, config.databaseName);
    await this.scheduler.boot();
  }

  /** boot(), then listen. Returns the address it listens on. */
  async start(): Promise<string> {
    await this.boot();
    const address = await this.app.listen({ host: this.config.host, port: this.config.port });
    this.log.info({ address, timezone: this.config.timezone, horizonMs: this.config.horizonMs }, 'punctual is ready');
    return address;
  }

  /** The clean stop. Safe to call twice: the second call gets the first one's promise. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  /**
   * Stops accepting requests and lets those in flight finish. A keep-alive connection that goes
   * idle meanwhile is closed at once (Fastify keeps idle ones 72 s), and after STOP_TIMEOUT_MS
   * whatever is left is cut.
   */
  async #closeHttp(): Promise<void> {
    const server = this.app.server;
    const reaper = setInterval(() => server.closeIdleConnections(), 100);
    const cutter = setTimeout(() => server.closeAllConnections(), this.config.stopTimeoutMs);
    try {
      await this.app.close();
    } finally {
      clearInterval(reaper);
      clearTimeout(cutter);
    }
  }

  async #stop(): Promise<void> {
    const started = Date.now();
    await this.#closeHttp();
    this.log.debug('stop: no longer accepting requests');
    await this.scheduler.stop();
    this.log.debug('stop: refill stopped, timers disarmed');
    const finished = await this.dispatcher.stop(this.config.stopTimeoutMs);
    this.log.debug({ finished }, 'stop: running handlers are done');
    await this.database.close();
    this.log.info({ ms: Date.now() - started, handlersFinished: finished }, 'punctual stopped');
  }
}
