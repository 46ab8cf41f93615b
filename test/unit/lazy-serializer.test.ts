import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { lazySerializers } from '../../src/http/lazy-serializer.js';

const schema = { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } } } as const;

describe('response serializers built on first use', () => {
  it('compiles none at start, then one per route on its first answer, with the schema in force', async () => {
    const compiled: string[] = [];
    const fastify = SerializerSelector();
    const counting: ReturnType<typeof SerializerSelector> = (external, options) => {
      const compile = fastify(external, options);
      return (route) => (compiled.push(route.url), compile(route));
    };
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
});
