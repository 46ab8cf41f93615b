/**
 * The dashboard: a static page at / (no build step) that uses the same HTTP API, with the same
 * token, as everyone else. The page itself needs no token; the data it shows does.
 *
 * Its files sit next to this module's directory (src/http/dashboard, copied to dist/http/dashboard
 * by the build), so the built package needs no src/. The chart library, uPlot, is served from the
 * installed package, found the way Node finds any dependency: no CDN, nothing bundled. Only the
 * files listed here are served, read once at start.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';

/**
 * Beside this module's directory (dist/http/routes → dist/http/dashboard), or, when this module
 * is part of the bundled entry (dist/app/main.js, scripts/build.mjs), beside that one's.
 */
const HERE =
  [new URL('../dashboard/', import.meta.url), new URL('../http/dashboard/', import.meta.url)].find((dir) =>
    existsSync(fileURLToPath(new URL('index.html', dir))),
  ) ?? new URL('../dashboard/', import.meta.url);
const UPLOT = join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist');

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

export const dashboardRoutes: FastifyPluginAsync = async (app) => {
  const own = (name: string) => readFileSync(fileURLToPath(new URL(name, HERE)), 'utf8');
  const files: Record<string, [string, string]> = {
    '/': ['text/html; charset=utf-8', own('index.html')],
    '/ui/dashboard.js': [JS, own('dashboard.js')],
    '/ui/charts.js': [JS, own('charts.js')],
    '/ui/dashboard.css': [CSS, own('dashboard.css')],
    '/ui/vendor/uPlot.esm.js': [JS, readFileSync(join(UPLOT, 'uPlot.esm.js'), 'utf8')],
    '/ui/vendor/uPlot.min.css': [CSS, readFileSync(join(UPLOT, 'uPlot.min.css'), 'utf8')],
  };
  for (const [path, [type, body]] of Object.entries(files)) {
    app.get(path, { schema: { hide: true } }, async (_request, reply) => reply.type(type).header('cache-control', 'no-cache').send(body));
  }
};
