/** Liveness and readiness, open without the token so probes need no secret. */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Health, Readiness } from '../../contract/health.js';
import type { ClockReading } from '../../time/db-clock.js';

export interface HealthOptions {
  /** True once the boot load is armed. */
  booted: () => boolean;
  /** True when the database answers now. */
  databaseUp: () => Promise<boolean>;
  armed: () => number;
  /** With SHARDING=on: how many of the 256 shards this process holds. */
  shards?: () => number;
  /** With SHARDING=on, until it first holds every shard it is to own: how many of them it holds. */
  shardsWaiting?: () => { held: number; wanted: number } | undefined;
  /** The database clock's offset from punctual's (src/time/db-clock.ts). */
  dbClock?: () => ClockReading;
  /** Each delivery target's health (src/targets/), reported on /readyz without failing it. */
  targets?: () => Record<string, { kind: string; up: boolean; lastError: string | null }>;
  /** With TEST_CLOCK=on: the test clock's time, named on /readyz. */
  testClock?: () => number;
  /** Whether the API asks for a token (API_TOKEN or any scoped token). */
  authRequired?: boolean;
}

/**
 * The probes answer objects built here with exactly their schema's fields, so JSON.stringify
 * writes what the schema's serializer would: a probe polled during the start then costs no
 * serializer compile (30 ms of a start's CPU, for /readyz's 503 and 200).
 */
const plainJson = () => JSON.stringify;

/** Each target's health with the schema's fields alone (TargetHealthJson): whatever else a target's object holds stays here. */
function targetFields(targets: ReturnType<NonNullable<HealthOptions['targets']>> | undefined): Readiness['targets'] {
  if (targets === undefined) return undefined;
  return Object.fromEntries(Object.entries(targets).map(([name, { kind, up, lastError }]) => [name, { kind, up, lastError }]));
}

export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (fastify, options) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/healthz',
    {
      schema: { summary: 'The process is alive', tags: ['operations'], security: [], response: { 200: Health } },
      serializerCompiler: plainJson,
    },
    async () => ({ status: 'ok', auth: options.authRequired ?? false }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Booted and the database answers',
        tags: ['operations'],
        security: [],
        response: { 200: Readiness, 503: Readiness },
      },
      serializerCompiler: plainJson,
    },
    async (_request, reply) => {
      const armed = options.armed();
      const shards = options.shards?.();
      if (!options.booted()) return reply.status(503).send({ status: 'starting', armed, reason: 'the boot load is not armed yet' });
      const waiting = options.shardsWaiting?.();
      if (waiting !== undefined)
        return reply.status(503).send({
          status: 'starting',
          armed,
          shards,
          reason:
            waiting.wanted === 0
              ? 'its first shard lease round has not succeeded yet'
              : `holds ${waiting.held} of the ${waiting.wanted} shards it is to own: the processes that hold the others hand them ` +
                'over at their next lease round, or their leases run out if they are gone (LEASE_MS)',
        });
      if (!(await options.databaseUp()))
        return reply.status(503).send({ status: 'unavailable', armed, reason: 'the database does not answer' });
      // A clock offset is a warning, not unreadiness: punctual still fires by its own clock.
      const clock = options.dbClock?.();
      const targets = targetFields(options.targets?.());
      const testClock = options.testClock === undefined ? undefined : new Date(options.testClock()).toISOString();
      const held = {
        ...(shards === undefined ? {} : { shards }),
        ...(targets === undefined ? {} : { targets }),
        ...(testClock === undefined ? {} : { testClock }),
      };
      if (clock === undefined) return { status: 'ready', armed, ...held };
      return {
        status: 'ready',
        armed,
        ...held,
        dbClockOffsetMs: clock.offsetMs,
        ...(clock.warning === undefined ? {} : { warning: clock.warning }),
      };
    },
  );
};
