/**
 * The task type routes: list the types with their pause, limits and what runs and waits; pause,
 * resume, and set limits (admin). The settings are stored (type_controls) and applied by
 * dispatch/limits.ts, which this process re-reads at once after a change (other processes at
 * their next reconcile). A type is known when a handler is registered for it, or when settings
 * are stored for it.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Clock } from '../../time/clock.js';
import type { HandlerRegistry } from '../../handlers/registry.js';
import type { TypeLimits } from '../../dispatch/limits.js';
import type { TypeControlStore, TypeLimitsSetting } from '../../store/type-controls.js';
import { notFound } from '../errors.js';
import { ErrorJson } from '../../contract/errors.js';
import { LimitsBody, TypeJson, TypeList, TypeParams } from '../../contract/types.js';

export interface TypeRoutesOptions {
  controls: TypeControlStore;
  limits: TypeLimits;
  registry: HandlerRegistry;
  clock: Clock;
}

export const typeRoutes: FastifyPluginAsync<TypeRoutesOptions> = async (plain, options) => {
  const app = plain.withTypeProvider<TypeBoxTypeProvider>();
  const { controls, limits, registry, clock } = options;

  const known = (): string[] => [...new Set([...registry.types, ...limits.states().keys()])].sort();

  async function describe(types: string[]): Promise<TypeJson[]> {
    const due = await controls.countDueByType(clock.now());
    const states = limits.states();
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
    if (registry.get(type) === undefined && limits.control(type) === undefined) throw notFound(`task type ${JSON.stringify(type)}`);
    return type;
  }

  /** After a change: this process applies it now, and answers the type as it is. */
  async function changed(type: string): Promise<TypeJson> {
    await limits.load();
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
      await controls.changeLimits(type, change, clock.now());
      return changed(type);
    },
  );

  const switches = [
    ['pause', true, 'Pause a type: its due tasks wait, pending with no attempt used, until it is resumed'],
    ['resume', false, 'Resume a type: the tasks that waited run in runAt order (those past the misfire grace follow their misfire rule)'],
  ] as const;
  for (const [action, paused, summary] of switches) {
    app.post(
      `/types/:type/${action}`,
      { schema: { summary, tags: ['types'], params: TypeParams, response: typeResponses } },
      async (request) => {
        const type = knownType(request.params.type);
        await controls.setPaused(type, paused, clock.now());
        return changed(type);
      },
    );
  }
};
