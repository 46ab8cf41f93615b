/**
 * Response serializers built on first use instead of at start. Fastify compiles a
 * fast-json-stringify function for every response schema of every route while it starts (about a
 * third of a start's CPU time, with this API's routes); most routes answer nothing for a long
 * while, some never. Here each route's serializer is compiled by Fastify's own compiler (the same
 * options, the same shared schemas) the first time that route answers with that status, then
 * kept. The first answer of a route pays a few ms once.
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

type Factory = ReturnType<typeof SerializerSelector>;

/** `factory`'s serializers, each compiled the first time it is called. */
export function lazySerializers(factory: Factory): Factory {
  return (externalSchemas, options) => {
    const compile = factory(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc: unknown) => (serialize ??= compile(route))(doc);
    };
  };
}

/** A drop-in for Fastify's `schemaController.compilersFactory.buildSerializer`: its own compiler, lazily. */
export const buildLazySerializer: Factory = lazySerializers(SerializerSelector());
