/**
 * The composition root: builds every part from the configuration and runs the boot and the
 * shutdown in the order that keeps tasks safe.
 *
 * Boot: the shop's handler modules (HANDLERS, createPunctual's handlers) → listen (every request
 * but /healthz and /readyz answered 503 until booted) → wait for the database (up to DB_WAIT_MS)
 * → migrations → the stored procedures of PROCEDURES read as task types → pool → scheduler boot load → (SHARDING=on: join and
 * take this process's shards, arming their tasks) → database clock check → retention sweep
 * started → requests let in. Listening first finds a port in use before anything touches the
 * database; holding the port from then on (rather than trying it and letting go) leaves no
 * moment in which another process could take it between the check and the real listen.
 * Stop: stop accepting requests → stop the refill and the retention sweep, disarm the timers →
 * (SHARDING=on: release the shard leases, so the others take over at once) → let running handlers finish (up to STOP_TIMEOUT_MS) → close the pool. A stop during the boot
 * (a SIGTERM while starting) ends the boot at its next step, never lets requests in, and then stops as usual.
 *
 * The parts are built in an order without cycles: timers push into the dispatcher's queue,
 * arming turns the lifecycle's effects into timers, the scheduler and the dispatcher both work
 * through the lifecycle, and neither knows the other.
 */
import { preloadHttpClient } from '../handlers/egress.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../time/clock.js';
import type { Config } from './config.js';
import { Database, ensureDatabase } from '../db/connection.js';
import { migrateDatabase } from '../db/migrate.js';
import { loggable } from '../db/errors.js';
import { createRegistry, type HandlerRegistry } from '../handlers/registry.js';
import { handlersFrom, loadHandlerModules } from '../handlers/modules.js';
import { ProcedureError, procedureHandlers } from '../handlers/procedure.js';
import { buildApp } from '../http/app.js';
import { securityOptions } from '../http/security.js';
import { createLogger } from '../observability/log.js';
import { Tracing } from '../observability/tracing.js';
import { VERSION } from '../observability/metrics.js';
import { Metrics } from '../observability/metrics.js';
import { RecentRuns } from '../observability/recent-runs.js';
import { registerServiceGauges } from './service-gauges.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { Arming } from '../timers/arming.js';
import { CreatedHere } from '../timers/created-here.js';
import { Retention } from '../maintenance/retention.js';
import { DbClock } from '../time/db-clock.js';
import { lockAhead } from '../time/lock-ahead.js';
import { StepWatch, StepWatchMetrics } from '../time/step-watch.js';
import { Dispatcher } from '../dispatch/dispatcher.js';
import { PullHub } from '../dispatch/pull-hub.js';
import { PullLifecycle } from '../lifecycle/pull.js';
import { PullStore } from '../store/pulls.js';
import { Targets } from '../targets/targets.js';
import { publish } from '../handlers/publish.js';
import { DispatchMetrics, Outcomes } from '../dispatch/outcomes.js';
import { DueQueue } from '../timers/due-queue.js';
import { TypeAdmission } from '../dispatch/limits.js';
import { FleetSlots } from '../dispatch/fleet-slots.js';
import { LimitSlotStore } from '../store/limit-slots.js';
import { TypeControls } from '../dispatch/type-controls.js';
import { ControlsWatch } from '../dispatch/controls-watch.js';
import { TypeControlStore } from '../store/type-controls.js';
import { Scheduler, SchedulerMetrics } from '../timers/scheduler.js';
import { Timers } from '../timers/timers.js';
import { TaskStore } from '../store/task-store.js';
import { useIndexHints } from '../store/sql/index-hints.js';
import { RunHistory } from '../store/run-history.js';
import { AuditStore } from '../store/audit.js';
import { EventStore } from '../store/events.js';
import { SummaryReader } from '../store/summary.js';
import { sleep } from '../util/async.js';
import { UpcomingLoad } from '../store/upcoming-load.js';
import { LeaseKeeper, ShardMetrics } from '../cluster/lease-keeper.js';
import { readCluster } from '../cluster/view.js';
import { waitForDatabase } from './start-errors.js';
import { ManualClock } from '../time/clock-manual.js';
import { TestClockStore } from '../store/test-clock.js';
import { TestClock } from './test-clock.js';

export interface ServiceOptions {
  clock?: Clock;
  logger?: Logger;
  registry?: HandlerRegistry;
  /** A shop's own handlers as plain objects (createPunctual's `handlers`), added at start. */
  handlers?: readonly unknown[];
}

/** Where the handlers handed to createPunctual come from, in a start-up error. */
export const LIBRARY_HANDLERS = 'createPunctual handlers';

/** stop() was called before start() was done: not a failure, the stop ends the process. */
export class StoppedWhileStarting extends Error {
  override name = 'StoppedWhileStarting';
  constructor() {
    super('stopped while starting');
  }
}

export class Service {
  readonly database: Database;
  readonly store: TaskStore;
  /** Every run of every task (punctual_task_runs), written with its outcome. */
  readonly runHistory: RunHistory;
  /** Every change made through the API, by whom (punctual_audit_log). */
  readonly audit: AuditStore;
  readonly registry: HandlerRegistry;
  readonly timers: Timers;
  readonly lifecycle: Lifecycle;
  readonly dispatcher: Dispatcher;
  readonly scheduler: Scheduler;
  readonly stepWatch: StepWatch;
  readonly app: FastifyInstance;
  readonly log: Logger;
  /** The registry every part registers its metrics on (GET /metrics). */
  readonly metrics = new Metrics();
  /** The last hour of runs, for the dashboard's charts. */
  readonly recent = new RecentRuns();
  /** Runs by outcome, lateness, handler time: what the dispatcher records. */
  readonly runMetrics: DispatchMetrics;
  readonly retention: Retention;
  /** Another process's pause, resume or limit change, in force here within a second. */
  readonly #controlsWatch: ControlsWatch;
  readonly dbClock: DbClock;
  readonly limits: TypeAdmission;
  /** The one way to change a type's pause and limits: written and put in force together. */
  readonly typeControls: TypeControls;
  /** SHARDING=on: this process's shard leases (src/cluster/). */
  readonly keeper: LeaseKeeper | undefined;
  /** Where pull workers' lease requests wait (worker types, docs/workers.md). */
  readonly pullHub: PullHub;
  /** The named delivery targets of `publish` tasks (TARGETS, docs/targets.md). */
  readonly targets: Targets;
  /** This process in lease_owner: host, pid and a random tag. */
  readonly owner = `${hostname().slice(0, 40)}:${process.pid}:${randomBytes(4).toString('hex')}`;
  /** Traces (OpenTelemetry): spans exported when the standard OTEL_* variables name an endpoint. */
  readonly tracing: Tracing;
  /** TEST_CLOCK=on: the clock a shop's tests move (app/test-clock.ts); undefined on the real clock. */
  readonly testClock: TestClock | undefined;
  readonly #testClockStore: TestClockStore;
  #stopping: Promise<void> | undefined;
  #starting: Promise<string> | undefined;
  /** Aborted by stop(): a boot that migrates ends between two statements. */
  readonly #stopRequested = new AbortController();
  /** Whether the boot is applying migrations now. */
  #migrating = false;
  /** Whether the boot is done and requests are let in. */
  #open = false;
  /** The handler modules (HANDLERS) and the library's handlers, loaded once. */
  #extended: Promise<void> | undefined;
  #procedures = false;

  /** Builds the parts; touches no database until start(). */
  constructor(
    readonly config: Config,
    private readonly options: ServiceOptions = {},
  ) {
    const manual = config.service.testClock ? (options.clock instanceof ManualClock ? options.clock : new ManualClock()) : undefined;
    const clock = manual ?? options.clock ?? systemClock;
    this.log = options.logger ?? createLogger(config.service.logLevel);
    this.tracing = Tracing.fromEnv(process.env, { process: this.owner, version: VERSION, log: this.log });
    const metricRegistry = this.metrics.registry;
    this.database = Database.fromConfig(
      config.database,
      (from, to) => this.log.warn({ from, to }, 'database host did not answer; new connections go to the next host'),
      metricRegistry,
    );
    // Worker types' tasks get no timer (the pull hub watches them): the registry says which, once the handler modules are in.
    this.store = new TaskStore(this.database, () => this.registry.workerTypes);
    this.runHistory = new RunHistory(this.database);
    this.audit = new AuditStore(this.database);
    const upcoming = new UpcomingLoad(this.database);
    this.registry = options.registry ?? createRegistry(config.webhook, config.workers.types, config.handlers.closeOrder);
    this.targets = new Targets(config.targets.list, metricRegistry);
    if (this.targets.size > 0 && this.registry.get('publish') === undefined) this.registry.register(publish(this.targets));
    const fleetSlots = new FleetSlots(new LimitSlotStore(this.database), this.owner, (error) =>
      this.log.warn({ error: loggable(error) }, 'could not free a slot of the type limits; it frees at its lease end'),
    );
    this.limits = new TypeAdmission(clock, { registry: metricRegistry, fleet: fleetSlots });
    this.typeControls = new TypeControls(new TypeControlStore(this.database), this.limits, clock, this.log);
    registerServiceGauges(metricRegistry, {
      pendingByType: () => this.store.reads.countPendingByType(),
      overdue: (before) => upcoming.countDueBefore(before),
      ready: async () => this.scheduler.booted && (await this.database.ping()),
    });
    this.runMetrics = new DispatchMetrics(metricRegistry, this.recent);
    // Registered with SHARDING off too: its gauges then say 0.
    const shardMetrics = new ShardMetrics(metricRegistry);
    // On the test clock the database's offset is measured against the real clock: the moved one is no host's.
    this.dbClock = new DbClock({
      database: this.database,
      clock: manual === undefined ? clock : systemClock,
      log: this.log,
      registry: metricRegistry,
    });
    const queue = new DueQueue();
    const lockAheadMs = lockAhead(config.dispatcher.lockAheadMs, () => this.dbClock.reading);
    this.timers = new Timers(clock, (id, priority) => queue.push(id, priority), metricRegistry, lockAheadMs);
    this.keeper = config.cluster.sharding
      ? new LeaseKeeper({
          database: this.database,
          owner: this.owner,
          leaseMs: config.cluster.leaseMs,
          log: this.log,
          metrics: shardMetrics,
          // Called from start() on, when the scheduler is built.
          onAcquire: (shards) => this.scheduler.armShards(shards),
          // A shard handed to another member: its tasks due before the new owner can have armed
          // them (its next round, a lease's length at most) stay armed and claimable here.
          onLose: (shards, how) => void arming.disarmShards(shards, how === 'given-up' ? config.cluster.leaseMs : 0),
        })
      : undefined;
    const createdHere = new CreatedHere(2 * config.scheduler.refillIntervalMs);
    const arming = new Arming(
      this.timers,
      queue,
      this.keeper,
      this.keeper === undefined ? undefined : { set: createdHere, now: () => clock.now() },
    );
    const recorder = config.dispatcher.runHistory ? { history: this.runHistory, process: this.owner } : undefined;
    const notify =
      config.webhook.notifyUrl === undefined ? undefined : { url: config.webhook.notifyUrl, maxAttempts: config.tasks.maxAttempts };
    this.lifecycle = new Lifecycle({
      store: this.store,
      clock,
      retry: config.retry,
      effects: arming,
      runs: recorder,
      notify,
    });
    this.scheduler = new Scheduler({
      store: this.store,
      lifecycle: this.lifecycle,
      clock,
      log: this.log,
      arming,
      ...config.scheduler,
      metrics: new SchedulerMetrics(metricRegistry),
      onReconcile: () => {
        void this.dbClock.measure();
        // Another process may have paused, resumed or limited a type.
        this.typeControls.reload();
      },
      shards: this.keeper === undefined ? undefined : () => this.keeper!.ownedShards(),
    });
    const pulls = new PullStore(this.database);
    // What the pull hub's claims end as expired is told as the dispatcher tells its own.
    const expiredOutcomes = new Outcomes(this.log, this.runMetrics);
    const pull = new PullLifecycle({
      store: this.store,
      pulls,
      clock,
      retry: config.retry,
      effects: arming,
      payloadProblem: (type, payload) => this.registry.payloadProblem(type, payload),
      runs: recorder,
      notify,
      registry: metricRegistry,
    });
    this.pullHub = new PullHub({
      lifecycle: pull,
      pulls,
      limits: this.limits,
      clock,
      log: this.log,
      maxWaiting: config.workers.maxWaiting,
      onExpired: (task, now) => expiredOutcomes.expired(task, now),
      registry: metricRegistry,
    });
    arming.handOver({
      has: (type) => this.registry.get(type)?.effect === 'worker',
      due: (type, runAt) => this.pullHub.dueAt(type, runAt),
    });
    this.dispatcher = new Dispatcher({
      database: this.database,
      store: this.store,
      lifecycle: this.lifecycle,
      registry: this.registry,
      queue,
      effects: arming,
      clock,
      log: this.log,
      ...config.dispatcher,
      lockAheadMs,
      owner: this.owner,
      metrics: this.runMetrics,
      limits: this.limits,
      misfireGraceMs: config.scheduler.misfireGraceMs,
      mayClaim: this.keeper === undefined ? undefined : (id) => this.keeper!.mayClaim(id) || createdHere.has(id, clock.now()),
      createdHere: this.keeper === undefined ? undefined : (id) => createdHere.has(id, clock.now()),
      fence:
        this.keeper === undefined
          ? undefined
          : (ids) => ({
              ...this.keeper!.fence(ids),
              unfenced: ids.filter((id) => !this.keeper!.owns(id) && createdHere.has(id, clock.now())),
            }),
      pulled: (tasks) => this.pullHub.due(tasks),
      tracing: this.tracing,
    });
    this.#testClockStore = new TestClockStore(this.database);
    this.testClock =
      manual === undefined
        ? undefined
        : new TestClock({
            clock: manual,
            store: this.#testClockStore,
            timers: this.timers,
            queue,
            scheduler: this.scheduler,
            dispatcher: this.dispatcher,
            pullHub: this.pullHub,
            limits: this.limits,
            pulled: (type) => this.registry.get(type)?.effect === 'worker',
            log: this.log,
          });
    this.#controlsWatch = new ControlsWatch(this.typeControls, this.log);
    this.retention = new Retention({
      store: this.store,
      audit: this.audit,
      clock,
      log: this.log,
      registry: metricRegistry,
      ...config.retention,
    });
    this.stepWatch = new StepWatch({
      clock,
      log: this.log,
      metrics: new StepWatchMetrics(metricRegistry),
      timers: this.timers,
      scheduler: this.scheduler,
    });
    this.app = buildApp({
      logger: this.log,
      apiToken: config.http.apiToken,
      roleTokens: config.roles,
      metrics: this.metrics,
      tasks: {
        store: this.store,
        lifecycle: this.lifecycle,
        registry: this.registry,
        summary: new SummaryReader(this.store, clock, () => this.timers.size),
        clock,
        tracing: this.tracing,
        ...config.tasks,
      },
      security: securityOptions(config.http),
      health: {
        booted: () => this.scheduler.booted,
        databaseUp: () => this.database.ping(),
        armed: () => this.timers.size,
        shards: this.keeper === undefined ? undefined : () => this.keeper!.shardsOwned,
        shardsWaiting: this.keeper === undefined ? undefined : () => this.keeper!.waitingForShards,
        dbClock: () => this.dbClock.reading,
        testClock: manual === undefined ? undefined : () => manual.now(),
        targets: this.targets.size === 0 ? undefined : () => this.targets.health(),
        authRequired:
          config.http.apiToken !== undefined ||
          config.roles.named.length > 0 ||
          (['read', 'write', 'admin', 'worker'] as const).some((role) => config.roles[role].length > 0),
      },
      runs: { store: this.store, history: this.runHistory, clock },
      audit: { store: this.audit, clock },
      events: {
        store: new EventStore(this.database),
        clock,
        replay: config.http.eventsReplay,
        pollMs: config.http.eventsPollMs,
        stallMs: config.http.eventsStallMs,
      },
      charts: { clock, upcoming, recent: this.recent },
      testClock: { control: this.testClock, timezone: config.tasks.timezone },
      types: { controls: this.typeControls, registry: this.registry },
      cluster: { read: () => readCluster(this.database, this.owner, config.cluster.sharding, config.cluster.leaseMs) },
      workers: {
        hub: this.pullHub,
        store: this.store,
        pull,
        registry: this.registry,
        clock,
        maxLeaseMs: config.workers.maxLeaseMs,
        maxWaitingPerToken: config.workers.maxWaitingPerToken,
        tracing: this.tracing,
      },
    });
    // start() listens before the boot (see the header): until the boot is done, only the probes
    // answer. A service booted without start() (embedded, tests) has nothing to hold back.
    this.app.addHook('onRequest', async (request, reply) => {
      if (this.#starting === undefined || this.#open || request.url === '/healthz' || request.url.startsWith('/readyz')) return;
      await reply
        .code(503)
        .header('retry-after', '1')
        .send({ statusCode: 503, code: 'PUNCTUAL_STARTING', error: 'Service Unavailable', message: 'punctual is starting' });
    });
  }

  /** Whether stop() was called. */
  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /**
   * The shop's own handlers, before anything listens: the modules of HANDLERS in order, then
   * the library's list. A module that does not load, or a type twice, rejects (HandlerModuleError).
   */
  #extend(): Promise<void> {
    this.#extended ??= (async () => {
      for (const loaded of await loadHandlerModules(this.config.handlers.modules)) this.registry.registerFrom(loaded);
      if (this.options.handlers !== undefined) this.registry.registerFrom(handlersFrom(LIBRARY_HANDLERS, this.options.handlers));
    })();
    return this.#extended;
  }

  /** PROCEDURES as task types, read from the database before any task can fire. */
  async #addProcedures(): Promise<void> {
    if (this.#procedures) return;
    this.#procedures = true;
    for (const handler of await procedureHandlers(this.database, this.config.handlers.procedures, this.config.database.name)) {
      if (this.registry.get(handler.type) !== undefined) {
        throw new ProcedureError(`PROCEDURES: ${handler.type} is already a task type (built in, or from a handler module)`);
      }
      this.registry.register(handler);
    }
  }

  /** Creates the database if missing, migrates, loads and arms the pending tasks. */
  async boot(): Promise<void> {
    await this.#extend();
    const { url, name, waitMs } = this.config.database;
    const access = this.config.database;
    await waitForDatabase(() => ensureDatabase(url, name, access), {
      waitMs,
      stopped: () => this.stopping,
      onWait: (waitedMs, reason) => this.log.warn({ waitedMs, waitMs, reason }, 'the database does not answer yet: waiting'),
    });
    if (this.stopping) return;
    this.#migrating = true;
    let migrated;
    try {
      migrated = await migrateDatabase(url, name, access, { log: this.log, signal: this.#stopRequested.signal });
    } finally {
      this.#migrating = false;
    }
    useIndexHints(!migrated.tasksThroughView);
    if (this.stopping) return;
    if (this.testClock !== undefined) await TestClock.claim(this.#testClockStore, name);
    else await TestClock.release(this.#testClockStore, this.log);
    // The batches' connections, opened while the boot goes on: the first firings pay no handshake.
    void this.database.warm(this.config.dispatcher.concurrency + 1);
    await this.#addProcedures();
    await this.typeControls.load(); // before any timer fires: a paused type stays paused through a restart
    // From the boot load on: a step re-arms what is armed so far. The test clock moves by steps of its own.
    if (this.testClock === undefined) this.stepWatch.start();
    await this.dbClock.measure(); // before the boot load: LOCK_AHEAD_MS=auto arms by the round trip it measures
    await this.scheduler.boot();
    if (this.stopping) return;
    // After the boot load: the shards the keeper takes are armed by the scheduler.
    await this.keeper?.start();
    this.targets.open(); // connects without waiting: a broker that is down is retried with backoff
    this.retention.start();
    this.#controlsWatch.start();
    this.#open = !this.stopping; // booted: requests are let in
  }

  /**
   * Listen, boot(), then let requests in. Returns the address it listens on. When stop() is
   * called meanwhile it never lets requests in, and rejects with StoppedWhileStarting.
   */
  start(): Promise<string> {
    this.#starting ??= this.#start();
    return this.#starting;
  }

  async #start(): Promise<string> {
    this.log.debug('booting');
    if (this.testClock !== undefined)
      this.log.warn(
        { testClock: true },
        "TEST_CLOCK is on: time moves only through POST /test/clock. For a shop's tests only, never in production",
      );
    await this.#extend(); // before listening: a module that does not load stops the start here
    const address = await this.app.listen({
      host: this.config.http.host,
      port: this.config.http.port,
      // Fastify's own "Server listening" read as ready to a shop whose start then failed on the database.
      listenTextResolver: (at) => `listening at ${at}, booting: requests but /healthz and /readyz wait until "punctual is ready"`,
    });
    this.log.debug({ address }, 'listening; requests wait for the boot');
    try {
      if (this.stopping) throw new StoppedWhileStarting();
      await this.boot();
    } catch (error) {
      if (this.stopping) throw new StoppedWhileStarting(); // the stop closed what the boot was using
      throw error;
    }
    if (this.stopping) throw new StoppedWhileStarting();
    this.log.info({ address, timezone: this.config.tasks.timezone, horizonMs: this.config.scheduler.horizonMs }, 'punctual is ready');
    // After the start (which B0 times), before a first webhook needs it; with no host allowed every
    // webhook is refused before it would load, and the process keeps the memory.
    if (this.config.webhook.allowedHosts.length > 0) setImmediate(() => void preloadHttpClient());
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
    const cutter = setTimeout(() => server.closeAllConnections(), this.config.service.stopTimeoutMs);
    try {
      await this.app.close();
    } finally {
      clearInterval(reaper);
      clearTimeout(cutter);
    }
  }

  async #stop(): Promise<void> {
    const started = Date.now();
    this.#stopRequested.abort();
    if (this.#starting !== undefined) {
      // Stopping while booting: the boot ends at its next step (the load at its next page);
      // wait for it, so nothing it started is cut off half way, but not longer than a stop may
      // take, unless it is migrating: a schema change is never cut (the migrator stops between two statements).
      const booting = this.#starting.then(
        () => undefined,
        () => undefined,
      );
      await this.scheduler.stop();
      if (this.#migrating) {
        this.log.info('stopping once the migration statement in flight is done');
        await booting;
      } else await Promise.race([booting, sleep(this.config.service.stopTimeoutMs)]);
    }
    // Waiting lease requests are answered (no task) at once: the HTTP close would wait for them.
    this.pullHub.stop();
    await this.#closeHttp();
    this.log.debug('stop: no longer accepting requests');
    this.stepWatch.stop();
    this.#controlsWatch.stop();
    await Promise.all([this.scheduler.stop(), this.retention.stop()]);
    // Handover: the leases are released at once, so the others take the shards over now.
    await this.keeper?.stop();
    this.log.debug('stop: refill and retention stopped, timers disarmed');
    const finished = await this.dispatcher.stop(this.config.service.stopTimeoutMs);
    this.log.debug({ finished }, 'stop: running handlers are done');
    await this.targets.close();
    await this.database.close();
    await this.tracing.shutdown(); // sends the spans still buffered
    this.log.info({ ms: Date.now() - started, handlersFinished: finished }, 'punctual stopped');
  }
}
