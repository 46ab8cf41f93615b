/**
 * The dashboard: a static page at / (no build step) that uses the same HTTP API, with the same
 * token, as everyone else. The page itself needs no token; the data it shows does.
 */
import { readFileSync } from 'node:fs';
import type { FastifyPluginAsync } from 'fastify';

/** The files live in src/http/dashboard, found from src/http/routes or dist/http/routes alike. */
const read = (name: string) => readFileSync(new URL(`../../../src/http/dashboard/${name}`, import.meta.url), 'utf8');

export const dashboardRoutes: FastifyPluginAsync = async (app) => {
  const files: Record<string, [string, string]> = {
    '/': ['text/html; charset=utf-8', read('index.html')],
    '/ui/dashboard.js': ['text/javascript; charset=utf-8', read('dashboard.js')],
    '/ui/dashboard.css': ['text/css; charset=utf-8', read('dashboard.css')],
  };
  for (const [path, [type, body]] of Object.entries(files)) {
    app.get(path, { schema: { hide: true } }, async (_request, reply) => reply.type(type).header('cache-control', 'no-cache').send(body));
  }
};
