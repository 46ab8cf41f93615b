/**
 * The console: a static page (no build step) that uses the same HTTP API, with the same token,
 * as everyone else. The page itself needs no token; the data it shows does. Its views have
 * addresses of their own under /console (the page routes them with the History API), so every
 * such address answers the same page; / does too.
 *
 * Its files sit next to this module's directory (src/http/dashboard, copied to dist/http/dashboard
 * by the build), so the built package needs no src/. Its libraries, Preact with htm (the views)
 * and uPlot (the charts), are served from the installed packages, found the way Node finds any
 * dependency: no CDN, nothing bundled. Only the files listed here are served, read once at start.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
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
const resolve = createRequire(import.meta.url).resolve;
const UPLOT = join(dirname(resolve('uplot/package.json')), 'dist');
const PREACT = dirname(resolve('preact/package.json'));
const HTM = dirname(resolve('htm'));

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

export const dashboardRoutes: FastifyPluginAsync = async (app) => {
  const own = (name: string) => readFileSync(fileURLToPath(new URL(name, HERE)), 'utf8');
  const page = own('index.html');
  const modules = (dir: string) =>
    readdirSync(fileURLToPath(new URL(dir, HERE)))
      .filter((name) => name.endsWith('.js'))
      .map((name): [string, [string, string]] => [`/ui/${dir}${name}`, [JS, own(`${dir}${name}`)]]);
  const files: Record<string, [string, string]> = {
    '/': ['text/html; charset=utf-8', page],
    '/console': ['text/html; charset=utf-8', page],
    '/console/*': ['text/html; charset=utf-8', page],
    ...Object.fromEntries([...modules(''), ...modules('views/')]),
    '/ui/dashboard.css': [CSS, own('dashboard.css')],
    // The tab's icon: browsers ask for /favicon.ico whatever the page says; an SVG answers both.
    '/favicon.ico': ['image/svg+xml', own('icon.svg')],
    '/ui/icon.svg': ['image/svg+xml', own('icon.svg')],
    '/ui/vendor/uPlot.esm.js': [JS, readFileSync(join(UPLOT, 'uPlot.esm.js'), 'utf8')],
    '/ui/vendor/uPlot.min.css': [CSS, readFileSync(join(UPLOT, 'uPlot.min.css'), 'utf8')],
    '/ui/vendor/preact.js': [JS, readFileSync(join(PREACT, 'dist', 'preact.module.js'), 'utf8')],
    // The hooks import "preact" by its bare name, which a browser cannot resolve without an import map.
    '/ui/vendor/hooks.js': [
      JS,
      readFileSync(join(PREACT, 'hooks', 'dist', 'hooks.module.js'), 'utf8').replace(/from\s*"preact"/g, 'from"/ui/vendor/preact.js"'),
    ],
    '/ui/vendor/htm.js': [JS, readFileSync(join(HTM, 'htm.module.js'), 'utf8')],
  };
  for (const [path, [type, body]] of Object.entries(files)) {
    app.get(path, { schema: { hide: true } }, async (_request, reply) => reply.type(type).header('cache-control', 'no-cache').send(body));
  }
};
