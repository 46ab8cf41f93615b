/**
 * Every metric punctual exposes keeps its name, type, help, labels and buckets: the Grafana
 * dashboard, the alert rules and the operators' own queries read them. The catalogue
 * (metric-catalogue.json, taken from the service before each module registered its own metrics)
 * is what a build must expose, with SHARDING off and on alike. The service is only built here,
 * never started, so no database is touched.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { Service } from '../../src/app/service.js';

/** A registered metric, with the public fields prom-client's typings leave out. */
interface Registered {
  name: string;
  help: string;
  labelNames?: string[];
  upperBounds?: number[];
  get(): Promise<{ type: string }>;
}

const catalogue = JSON.parse(readFileSync(new URL('./metric-catalogue.json', import.meta.url), 'utf8'));

async function exposed(env: Record<string, string | undefined>) {
  const service = new Service(loadConfig(env));
  try {
    const metrics = (service.metrics.registry.getMetricsAsArray() as unknown as Registered[]).filter((metric) =>
      metric.name.startsWith('punctual_'),
    );
    const described = await Promise.all(
      metrics.map(async (metric) => {
        const { labelNames, upperBounds } = metric;
        return {
          name: metric.name,
          type: (await metric.get()).type,
          help: metric.help,
          labels: [...(labelNames ?? [])],
          ...(upperBounds === undefined ? {} : { buckets: upperBounds }),
        };
      }),
    );
    return described.sort((a, b) => a.name.localeCompare(b.name));
  } finally {
    await service.database.close();
  }
}

describe('the metric catalogue', () => {
  it.each([{}, { SHARDING: 'on' }])('is what %j exposes, name for name, help for help', async (env) => {
    expect(await exposed(env)).toEqual(catalogue);
  });
});
