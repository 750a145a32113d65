import type { FastifyInstance } from 'fastify';
import { okAnswerSchema } from '../../wire/operations.js';
import { otherContent, route } from '../route.js';
import { tenantsOf } from '../../auth/tenant-reach.js';
import type { HttpDeps } from '../deps.js';

export function metricsRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'GET', url: '/metrics', access: 'read', tenants: 'filtered', tag: 'operations',
    summary: 'Prometheus metrics (a read token, unless the server runs with --metrics-public); a token scoped to tenants gets only their series (those labelled tenant)',
    response: otherContent(['text/plain; version=0.0.4'], 'the Prometheus text format'),
  }, async ({ reply, principal }) => {
    reply.header('content-type', d.metrics.contentType);
    return d.metrics.metrics(tenantsOf(principal));
  });
  route(app, { method: 'GET', url: '/healthz', access: 'public', tenants: 'none', tag: 'operations', summary: 'Liveness: 200 when the server answers', response: okAnswerSchema }, () => ({ ok: true as const }));
}
