import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { route } from '../route.js';

/** The dashboard's files: plain HTML, CSS and a JS module, so there is no build step. */
export const DASHBOARD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dashboard');

const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'graph.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

/**
 * The pages are public (they hold no data); every call they make sends the
 * admin token the user pasted (kept in the browser's localStorage).
 */
export function dashboardRoutes(app: FastifyInstance): void {
  const serve = (file: string) => async ({ reply }: { reply: import('fastify').FastifyReply }) => {
    reply.header('content-type', FILES[file]!).header('cache-control', 'no-cache');
    return readFileSync(path.join(DASHBOARD_DIR, file), 'utf8');
  };
  route(app, { method: 'GET', url: '/', access: 'public', tag: 'dashboard', summary: 'The web dashboard', responds: 'text/html' }, serve('index.html'));
  for (const file of Object.keys(FILES).filter((f) => f !== 'index.html')) {
    route(app, { method: 'GET', url: `/assets/${file}`, access: 'public', tag: 'dashboard', summary: `Dashboard asset ${file}`, responds: FILES[file] }, serve(file));
  }
}
