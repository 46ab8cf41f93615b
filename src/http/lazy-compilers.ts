/**
 * Response serializers and request validators built on first use instead of at start. Fastify
 * compiles a fast-json-stringify function for every response schema, and a validator for every
 * request schema, of every route while it starts (about a third of a start's CPU time with this
 * API's routes, the validators 18 ms of it); most routes answer nothing for a long while, some
 * never. Here each one is compiled by the same compiler (the same options, the same shared
 * schemas) the first time its route needs it, then kept. The first request of a route pays a few
 * ms once.
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { TypeBoxValidatorCompiler } from '@fastify/type-provider-typebox';
import type { FastifySchemaCompiler } from 'fastify';

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

/** `compiler`'s validators, each compiled the first time a request is checked with it. */
export function lazyValidators<S>(compiler: FastifySchemaCompiler<S>): FastifySchemaCompiler<S> {
  return (route) => {
    let validate: ReturnType<FastifySchemaCompiler<S>> | undefined;
    return (data: unknown) => (validate ??= compiler(route))(data);
  };
}

/** A drop-in for Fastify's `schemaController.compilersFactory.buildSerializer`: its own compiler, lazily. */
export const buildLazySerializer: Factory = lazySerializers(SerializerSelector());

/** TypeBox's validator compiler (@fastify/type-provider-typebox), lazily. */
export const lazyTypeBoxValidator = lazyValidators(TypeBoxValidatorCompiler);
