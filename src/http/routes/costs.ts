import type { FastifyInstance } from 'fastify';
import { costsReport } from '../../engine/ops/priority.js';
import { costsAnswerSchema, costsQuerySchema } from '../../wire/costs.js';
import { route } from '../route.js';
import { tenantsOf } from '../../auth/tenant-reach.js';
import type { HttpDeps } from '../deps.js';

/** Spend as people see it (the dashboard's Spend page, `dagent costs`): read by anyone who reads. */
export function costRoutes(app: FastifyInstance, d: HttpDeps): void {
  route(app, {
    method: 'GET', url: '/api/costs', access: 'read', tenants: 'filtered', tag: 'costs', query: costsQuerySchema,
    summary: 'Spend per UTC day, per agent and per DAG (budget, spent, reserved, left), the attempts running with what they reported, the attempts a spend limit stopped, and usage by model',
    response: costsAnswerSchema,
  }, ({ query, principal }) => costsReport(d.db, { days: query.days, tenants: tenantsOf(principal) }));
}
