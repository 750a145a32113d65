import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

/** Comment lines keep idle proxies (and the browser) from closing a quiet stream. */
export const STREAM_KEEPALIVE_MS = 15_000;

export function streamRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'GET', url: '/api/events', access: 'read', tag: 'stream',
    query: z.object({ dag_id: z.string().optional().describe('only this DAG: its events, a snapshot of its tasks, then task.status changes') }),
    summary: 'Server-sent events: task and DAG events as they happen (LISTEN/NOTIFY, with polling as the fallback)',
    responds: 'text/event-stream; events: snapshot, task.status, dag.progress and every events-table type (task.failed, task.dead_lettered, dag.completed, …)',
  }, async ({ req, reply, query }) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n\n');
    let n = 0;
    const unsubscribe = await d.hub.subscribe({
      dagId: query.dag_id,
      send: (e) => {
        res.write(`id: ${++n}\nevent: ${e.type}\ndata: ${JSON.stringify(e.data)}\n\n`);
        if (e.type === 'close') res.end();
      },
    });
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), STREAM_KEEPALIVE_MS);
    req.raw.on('close', () => {
      clearInterval(keepalive);
      unsubscribe();
    });
  });
}
