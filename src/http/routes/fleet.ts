import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { tenantIdSchema } from '../../config/index.js';
import { agentList } from '../../engine/ops/agents.js';
import { statsGet } from '../../engine/read/inspect.js';
import { agentListAnswerSchema, statsAnswerSchema } from '../../wire/fleet.js';
import { route } from '../route.js';
import { tenantsOf } from '../../auth/tenant-reach.js';
import { servesBeyond } from '../../db/queries/tenants.js';
import type { HttpDeps } from '../deps.js';

/** The fleet as people see it: the registered agents, and the queue's health. */
export function fleetRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'fleet';
  route(app, {
    method: 'GET', url: '/api/agents', access: 'read', tenants: 'filtered', tag,
    summary: 'Registered agents: capabilities, budgets, spend and heartbeats', response: agentListAnswerSchema,
  }, async ({ principal }) => {
    const scope = tenantsOf(principal);
    const agents = await agentList(d.db, scope);
    // A token scoped to tenants sees which of its tenants an agent serves, not the others', nor what the agent says of
    // itself, nor the spend of one that also serves other tenants (partly theirs).
    return {
      agents: scope ? agents.map((a) => ({
        ...a, tenants: a.tenants?.filter((t) => scope.includes(t)) ?? null, metadata: {},
        ...(servesBeyond(a.tenants, scope) ? { spentUsd: null, reservedUsd: null, daySpentUsd: null } : {}),
      })) : agents,
    };
  });

  route(app, {
    method: 'GET', url: '/api/stats', access: 'read', tenants: 'filtered', tag,
    query: z.object({ tenant: tenantIdSchema.optional().describe('counts and oldest READY age of this tenant only (404 when there is none)') }),
    summary: 'Queue health: task counts by status and priority tier, oldest READY age, tenants and their shares, agents, which node runs each maintenance loop',
    response: statsAnswerSchema,
  }, ({ query, principal }) => statsGet(d.db, { tenant: query.tenant, tenants: tenantsOf(principal) }));
}
