import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotFoundError } from '../../errors.js';
import { route } from '../route.js';

/** The dashboard's files: plain HTML, CSS and a JS module, so there is no build step. */
export const DASHBOARD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dashboard');

/** The dashboard's files (every other name under /assets/ is a 404): its HTML, its CSS and its JS modules. */
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
const FILES = new Set(readdirSync(DASHBOARD_DIR).filter((f) => path.extname(f) in TYPES));

/**
 * The pages are public (they hold no data); every call they make sends the
 * admin token the user pasted (kept in the browser's localStorage).
 */
export function dashboardRoutes(app: FastifyInstance): void {
  const serve = (file: string, reply: FastifyReply) => {
    if (!FILES.has(file) || file === 'index.html') throw new NotFoundError('dashboard file', file);
    reply.header('content-type', TYPES[path.extname(file)]!).header('cache-control', 'no-cache');
    return readFileSync(path.join(DASHBOARD_DIR, file), 'utf8');
  };
  route(app, { method: 'GET', url: '/', access: 'public', tag: 'dashboard', summary: 'The web dashboard', responds: 'text/html' }, ({ reply }) => {
    reply.header('content-type', TYPES['.html']!).header('cache-control', 'no-cache');
    return readFileSync(path.join(DASHBOARD_DIR, 'index.html'), 'utf8');
  });
  route(app, {
    method: 'GET', url: '/assets/:file', access: 'public', tag: 'dashboard', summary: 'The dashboard\'s JS modules and CSS', responds: 'text/javascript or text/css',
  }, ({ params, reply }) => serve(params.file!, reply));
}
