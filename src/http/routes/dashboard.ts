import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotFoundError } from '../../errors.js';
import { packageRoot } from '../../package-root.js';
import { otherContent, route } from '../route.js';

// Plain files served as they are (no build step), so they ship as sources beside dist/: the dashboard/ folder at the
// package's root, a client of this API like any other (no import ties it to the server).
export const DASHBOARD_DIR = path.join(packageRoot(), 'dashboard');

/**
 * The dashboard's files by their path under it (`app.js`, `dlq/card.js`: a page's parts are one folder down), plain
 * HTML, CSS and JS modules (no build step); any other name under /assets/ is a 404.
 */
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
const ASSETS = new Set(readdirSync(DASHBOARD_DIR, { withFileTypes: true })
  .flatMap((e) => (e.isDirectory() ? readdirSync(path.join(DASHBOARD_DIR, e.name)).map((f) => `${e.name}/${f}`) : [e.name]))
  .filter((f) => path.extname(f) in TYPES && f !== 'index.html'));

const require = createRequire(import.meta.url);
const packageDir = (name: string) => path.dirname(require.resolve(`${name}/package.json`));
/** The graph's layout and pan-and-zoom libraries, served from their own packages as ES modules (no bundling). */
const VENDOR: Record<string, string> = {
  'dagre.js': path.join(packageDir('@dagrejs/dagre'), 'dist/dagre.esm.js'),
  'panzoom.js': path.join(packageDir('@panzoom/panzoom'), 'dist/panzoom.es.js'),
};

function send(file: string, reply: FastifyReply): string {
  reply.header('content-type', TYPES[path.extname(file)]!).header('cache-control', 'no-cache');
  return readFileSync(VENDOR[file] ?? path.join(DASHBOARD_DIR, file), 'utf8');
}

/**
 * The pages are public (they hold no data); every call they make sends the
 * admin token the user pasted (kept in the browser's localStorage).
 */
export function dashboardRoutes(app: FastifyInstance): void {
  route(app, { method: 'GET', url: '/', access: 'public', tenants: 'none', tag: 'dashboard', summary: 'The web dashboard', response: otherContent(['text/html'], 'the dashboard\'s page') }, ({ reply }) => send('index.html', reply));
  route(app, {
    method: 'GET', url: '/assets/:file', access: 'public', tenants: 'none', tag: 'dashboard', summary: 'The dashboard\'s JS modules and CSS',
    response: otherContent(['text/javascript', 'text/css'], 'the file'),
  }, ({ params, reply }) => {
    if (!ASSETS.has(params.file!) && !Object.hasOwn(VENDOR, params.file!)) throw new NotFoundError('dashboard file', params.file!);
    return send(params.file!, reply);
  });
  route(app, {
    method: 'GET', url: '/assets/:dir/:file', access: 'public', tenants: 'none', tag: 'dashboard', summary: 'The JS modules of a dashboard page\'s parts (dlq/card.js)',
    response: otherContent(['text/javascript'], 'the file'),
  }, ({ params, reply }) => {
    const file = `${params.dir!}/${params.file!}`;
    if (!ASSETS.has(file)) throw new NotFoundError('dashboard file', file);
    return send(file, reply);
  });
}
