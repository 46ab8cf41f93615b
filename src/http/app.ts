/**
 * buildApp assembles the HTTP API and never listens; the service decides when to listen, and
 * tests call app.inject().
 */
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { installAuth } from './auth.js';
import { TokenRoles } from './roles.js';
import { authRoutes } from './routes/auth.js';
import { installHeaders, installRequestGuard, type SecurityOptions, serverOptions } from './security.js';
import { installErrorHandler } from './errors.js';
import { installJsonBody } from './json-body.js';
import { buildLazySerializer, lazyTypeBoxValidator } from './lazy-compilers.js';
import { installOpenApi } from './openapi.js';
import { healthRoutes, type HealthOptions } from './routes/health.js';
import { taskRoutes, type TaskRoutesOptions } from './routes/tasks.js';
import { batchRoutes } from './routes/batch.js';
import { bulkRoutes } from './routes/bulk.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { metricsRoutes } from './routes/metrics.js';
import { chartRoutes, type ChartRoutesOptions } from './routes/charts.js';
import { typeRoutes, type TypeRoutesOptions } from './routes/types.js';
import { clusterRoutes, type ClusterRoutesOptions } from './routes/cluster.js';
import { workerRoutes, type WorkerRoutesOptions } from './routes/workers.js';
import { runRoutes, type RunRoutesOptions } from './routes/runs.js';
import { auditRoutes, type AuditRoutesOptions } from './routes/audit.js';
import { eventRoutes, type EventRoutesOptions } from './routes/events.js';
import { testClockRoutes, type TestClockRoutesOptions } from './routes/test-clock.js';
import { installAudit } from './audit.js';
import { randomUUID } from 'node:crypto';
import type { Metrics } from '../observability/metrics.js';

/** Requests are small: a task names its work, it does not carry it. */
export const BODY_LIMIT_BYTES = 128 * 1024;

/** Sent on every answer while the test clock is on (TEST_CLOCK=on). */
export const TEST_CLOCK_HEADER = 'punctual-test-clock';

export interface AppOptions {
  logger: Logger;
  apiToken: string | undefined;
  /** Tokens with a role (read, write, admin); API_TOKEN may do everything. */
  roleTokens?: ConstructorParameters<typeof TokenRoles>[1];
  metrics: Metrics;
  tasks: TaskRoutesOptions;
  health: HealthOptions;
  charts: ChartRoutesOptions;
  types: TypeRoutesOptions;
  cluster: ClusterRoutesOptions;
  /** Pull workers' routes (POST /workers/lease, ack, nack, extend). */
  workers?: WorkerRoutesOptions;
  runs: RunRoutesOptions;
  audit: AuditRoutesOptions;
  events: EventRoutesOptions;
  /** The test clock's routes; `control` undefined (the mode off) answers them 404. */
  testClock: TestClockRoutesOptions;
  security: SecurityOptions;
}

export function buildApp(options: AppOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // A key is up to 191 characters, up to 12 URL-encoded characters each.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2400 },
    // Unique across restarts and processes: the audit trail records it.
    genReqId: () => randomUUID(),
    // Response serializers and request validators compiled on first use, not at start (lazy-compilers.ts).
    schemaController: { compilersFactory: { buildSerializer: buildLazySerializer } },
    ...serverOptions(options.security),
  }) as unknown as FastifyInstance;
  app.setValidatorCompiler(lazyTypeBoxValidator);
  installErrorHandler(app);
  installJsonBody(app);
  installHeaders(app);
  installRequestGuard(app, options.security);
  if (options.testClock.control !== undefined) {
    // Loud on every answer: a service on the test clock must never pass for a production one.
    app.addHook('onSend', async (_request, reply) => {
      reply.header(TEST_CLOCK_HEADER, 'on');
    });
  }
  installAuth(app, {
    tokens: new TokenRoles(options.apiToken, options.roleTokens),
    failuresPerMinute: options.security.authFailuresPerMinute,
  });
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 400) {
      // The address, so an operator can find a client that keeps sending a wrong token (docs/security.md).
      request.log.info(
        { method: request.method, url: request.url, statusCode: reply.statusCode, remoteAddress: request.ip },
        'request refused',
      );
    }
  });
  installOpenApi(app, () => options.tasks.registry.payloadSchemas());
  installAudit(app, options.audit.store, options.audit.clock);
  void app.register(healthRoutes, options.health);
  void app.register(taskRoutes, options.tasks);
  void app.register(batchRoutes, options.tasks);
  void app.register(bulkRoutes, options.tasks);
  void app.register(metricsRoutes, { metrics: options.metrics });
  void app.register(dashboardRoutes);
  void app.register(authRoutes);
  void app.register(chartRoutes, options.charts);
  void app.register(typeRoutes, options.types);
  void app.register(clusterRoutes, options.cluster);
  if (options.workers !== undefined) void app.register(workerRoutes, options.workers);
  void app.register(runRoutes, options.runs);
  void app.register(auditRoutes, options.audit);
  void app.register(eventRoutes, options.events);
  void app.register(testClockRoutes, options.testClock);
  return app;
}
