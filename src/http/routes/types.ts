/**
 * The task type routes: list the types with their pause, limits and what runs and waits; pause,
 * resume, and set limits (admin). Each change is one call of dispatch/type-controls.ts, which
 * writes the setting and puts it in force in this process before it answers (other processes at
 * their next reconcile): a route never reloads anything itself. A type is known when a handler is
 * registered for it, or when settings are stored for it.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { HandlerRegistry } from '../../handlers/registry.js';
import type { TypeControls } from '../../dispatch/type-controls.js';
import type { TypeLimitsSetting } from '../../store/type-controls.js';
import { notFound } from '../errors.js';
import { ErrorJson } from '../../contract/errors.js';
import { LimitsBody, TypeJson, TypeList, TypeParams } from '../../contract/types.js';

export interface TypeRoutesOptions {
  controls: TypeControls;
  registry: HandlerRegistry;
}

export const typeRoutes: FastifyPluginAsync<TypeRoutesOptions> = async (plain, options) => {
  const app = plain.withTypeProvider<TypeBoxTypeProvider>();
  const { controls, registry } = options;

  const known = (): string[] => [...new Set([...registry.types, ...controls.states().keys()])].sort();

  async function describe(types: string[]): Promise<TypeJson[]> {
    // Cached a few seconds and capped (store/type-due.ts): polling /types must not load the database.
    const due = await controls.countDue(known());
    const states = controls.states();
    return types.map((type) => {
      const state = states.get(type);
      const control = state?.control;
      return {
        type,
        paused: control?.paused ?? false,
        maxConcurrency: control?.maxConcurrency ?? null,
        ratePerSecond: control?.ratePerSecond ?? null,
        groupBy: control?.groupBy ?? null,
        running: state?.running ?? 0,
        waiting: state?.waiting ?? 0,
        due: due.get(type) ?? 0,
        updatedAt: control === undefined ? null : new Date(control.updatedAt).toISOString(),
      };
    });
  }

  function knownType(type: string): string {
    if (registry.get(type) === undefined && controls.control(type) === undefined) throw notFound(`task type ${JSON.stringify(type)}`);
    return type;
  }

  /** The type as it is after a change, which is in force by then. */
  async function describeOne(type: string): Promise<TypeJson> {
    return (await describe([type]))[0]!;
  }

  const typeResponses = { 200: TypeJson, 400: ErrorJson, 401: ErrorJson, 403: ErrorJson, 404: ErrorJson };

  app.get(
    '/types',
    {
      schema: {
        summary: 'Task types with their pause, limits, runs and waiting tasks',
        tags: ['types'],
        response: { 200: TypeList, 401: ErrorJson },
      },
    },
    async () => ({ types: await describe(known()) }),
  );

  app.put(
    '/types/:type/limits',
    {
      schema: {
        summary: "Set a type's run limits (per process; per group of a payload field when groupBy is set)",
        tags: ['types'],
        params: TypeParams,
        body: LimitsBody,
        response: typeResponses,
      },
    },
    async (request) => {
      const type = knownType(request.params.type);
      const change: Partial<TypeLimitsSetting> = { ...request.body };
      if (typeof change.ratePerSecond === 'number') change.ratePerSecond = Math.round(change.ratePerSecond * 1000) / 1000;
      await controls.setLimits(type, change);
      return describeOne(type);
    },
  );

  const switches = [
    ['pause', 'Pause a type: its due tasks wait, pending with no attempt used, until it is resumed'],
    ['resume', 'Resume a type: the tasks that waited run in runAt order (those past the misfire grace follow their misfire rule)'],
  ] as const;
  for (const [action, summary] of switches) {
    app.post(
      `/types/:type/${action}`,
      { schema: { summary, tags: ['types'], params: TypeParams, response: typeResponses } },
      async (request) => {
        const type = knownType(request.params.type);
        await controls[action](type);
        return describeOne(type);
      },
    );
  }
};
