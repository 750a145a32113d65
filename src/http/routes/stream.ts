import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dagRequire } from '../../engine/read/inspect.js';
import { tenantObjectReach, tenantsOf } from '../../auth/tenant-reach.js';
import type { HttpDeps } from '../deps.js';
import { otherContent, route } from '../route.js';
import { LIMITS } from '../../config/index.js';
import { engineEvents } from '../../observability/engine-events.js';
import { sseKeepalive, sseOpen } from '../sse.js';

export function streamRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'GET', url: '/api/events', access: 'read', tenants: 'filtered', tag: 'stream',
    query: z.object({
      dag_id: z.string().regex(/^dag_[0-9a-z]{14}$/, { error: 'must be a DAG id (dag_ and 14 lowercase letters or digits)' }).optional()
        .describe('only this DAG: its events, a snapshot of its tasks, then task.status changes'),
    }),
    summary: 'Server-sent events: task and DAG events as they happen (LISTEN/NOTIFY, with polling as the fallback)',
    response: otherContent(['text/event-stream'], 'events: snapshot, task.status, dag.progress and every events-table type (task.failed, task.dead_lettered, dag.completed, …); close when the token is revoked or the server stops'),
  }, async ({ req, reply, query, principal }) => {
    // Refused before the stream opens: an unknown DAG is a 404, not an empty stream.
    if (query.dag_id) {
      // Another tenant's DAG, for a token scoped to tenants, is one that does not exist.
      if (principal) await tenantObjectReach(d.db, principal, 'dag', query.dag_id);
      await dagRequire(d.db, query.dag_id);
    }
    reply.hijack();
    const res = reply.raw;
    sseOpen(res);
    let n = 0;
    // A reader that does not read would make this process hold every event for it: once more than
    // LIMITS.streamBacklogBytes wait unsent, the stream is cut off (an EventSource reconnects and
    // starts from a fresh snapshot). Checked before each write, so one large snapshot still goes out.
    const send = (type: string, data: unknown) => {
      if (res.destroyed) return;
      if (res.writableLength > LIMITS.streamBacklogBytes) {
        d.log.warn({ tokenId: principal?.tokenId, dagId: query.dag_id, backlogBytes: res.writableLength }, 'event stream reader fell too far behind; cutting it off');
        engineEvents.emit('streamDropped', { tokenId: principal?.tokenId ?? null });
        res.destroy();
        return;
      }
      res.write(`id: ${++n}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    const unsubscribe = await d.hub.subscribe({
      dagId: query.dag_id,
      tenants: tenantsOf(principal),
      send: (e) => {
        send(e.type, e.data);
        if (e.type === 'close') res.end();
      },
    });
    const keepaliveStop = sseKeepalive(res);
    // A token revoked after the stream opened ends it when the revocation commits (auth/revocations.ts): the
    // revocation is heard on the connection the events come by, so no event committed after it goes out.
    const unwatch = principal ? d.revocations.watch(principal.tokenId, () => {
      if (res.writableEnded) return;
      send('close', { reason: 'token revoked' });
      res.end();
    }) : undefined;
    let ended = false;
    const closed = () => {
      if (ended) return;
      ended = true;
      keepaliveStop();
      unwatch?.();
      unsubscribe();
    };
    req.raw.on('close', closed);
    res.on('close', closed);
  });
}
