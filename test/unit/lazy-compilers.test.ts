import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { TypeBoxValidatorCompiler } from '@fastify/type-provider-typebox';
import type { FastifySchemaCompiler } from 'fastify';
import { lazySerializers, lazyValidators } from '../../src/http/lazy-compilers.js';
import { countingSerializers } from '../helpers/serializers.js';

const schema = { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } } } as const;

describe('schemas compiled on first use', () => {
  it('compiles none at start, then one per route on its first answer, with the schema in force', async () => {
    const { compiled, selector: counting } = countingSerializers();
    const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: lazySerializers(counting) } } });
    app.get('/a', { schema: { response: { 200: schema } } }, async () => ({ id: 7, name: 'seven', secret: 'not sent' }));
    app.get('/b', { schema: { response: { 200: schema } } }, async () => ({ id: 8, name: 'eight' }));
    await app.ready();
    expect(compiled).toEqual([]);
    // The property the schema does not name is not sent: the route's own serializer ran.
    expect((await app.inject('/a')).json()).toEqual({ id: 7, name: 'seven' });
    expect((await app.inject('/a')).json()).toEqual({ id: 7, name: 'seven' });
    expect(compiled).toEqual(['/a']);
    await app.close();
  });

  it('compiles no validator at start, then one per route and part on its first request, still refusing bad input', async () => {
    const compiled: string[] = [];
    const counting: FastifySchemaCompiler<unknown> = (route) => (
      compiled.push(`${route.url} ${route.httpPart}`),
      TypeBoxValidatorCompiler(route as Parameters<typeof TypeBoxValidatorCompiler>[0])
    );
    const app = Fastify();
    app.setValidatorCompiler(lazyValidators(counting));
    const body = { type: 'object', required: ['id'], properties: { id: { type: 'integer' } } } as const;
    app.post('/a', { schema: { body } }, async (request) => request.body);
    app.post('/b', { schema: { body } }, async (request) => request.body);
    await app.ready();
    expect(compiled).toEqual([]);
    expect((await app.inject({ method: 'POST', url: '/a', payload: { id: 'seven' } })).statusCode).toBe(400);
    expect((await app.inject({ method: 'POST', url: '/a', payload: {} })).statusCode).toBe(400);
    const good = await app.inject({ method: 'POST', url: '/a', payload: { id: 7 } });
    expect(good.statusCode).toBe(200);
    expect(good.json()).toEqual({ id: 7 });
    expect(compiled).toEqual(['/a body']);
    await app.close();
  });
});
