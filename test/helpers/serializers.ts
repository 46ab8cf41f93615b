/**
 * Fastify's own serializer compiler, wrapped to note each route it compiles for (`label` names
 * the route in the list): what a test of lazy compiling counts.
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

type Route = { url: string; httpStatus?: string };

export function countingSerializers(label: (route: Route) => string = (route) => route.url): {
  compiled: string[];
  selector: ReturnType<typeof SerializerSelector>;
} {
  const compiled: string[] = [];
  const fastify = SerializerSelector();
  const selector: ReturnType<typeof SerializerSelector> = (external, options) => {
    const compile = fastify(external, options);
    return (route) => (compiled.push(label(route)), compile(route));
  };
  return { compiled, selector };
}
