import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { lazySerializers } from '../../src/http/lazy-compilers.js';
import { healthRoutes, type HealthOptions } from '../../src/http/routes/health.js';
import { countingSerializers } from '../helpers/serializers.js';

describe('the probes', () => {
  it('answer with their schema fields alone and compile no serializer, polled while booting and after', async () => {
    const { compiled, selector: counting } = countingSerializers((route) => `${route.url} ${route.httpStatus}`);
    let booted = false;
    // A target whose health object holds more than the schema names: the extra never leaves.
    const targets = () => ({ orders: { kind: 'redis', up: true, lastError: null, url: 'redis://user:secret@10.0.0.5' } });
    const options: HealthOptions = { booted: () => booted, databaseUp: async () => true, armed: () => 3, targets };
    const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: lazySerializers(counting) } } });
    await app.register(healthRoutes, options);
    const starting = await app.inject('/readyz');
    expect([starting.statusCode, starting.json()]).toEqual([
      503,
      { status: 'starting', armed: 3, reason: 'the boot load is not armed yet' },
    ]);
    booted = true;
    const ready = await app.inject('/readyz');
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready', armed: 3, targets: { orders: { kind: 'redis', up: true, lastError: null } } });
    expect(ready.body).not.toContain('secret');
    expect((await app.inject('/healthz')).json()).toEqual({ status: 'ok', auth: false });
    expect(compiled).toEqual([]);
    await app.close();
  });
});
