import type { FastifyInstance } from 'fastify';
import { whoamiAnswerSchema } from '../../wire/tokens.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

/**
 * Who the presented token is: what an HTTP agent asks at start to learn the agent id its token acts as, so it
 * keeps that id across restarts without being told it twice.
 */
export function whoamiRoutes(app: FastifyInstance, _d: HttpDeps): void {
  route(app, {
    method: 'GET', url: '/api/whoami', access: 'token', tenants: 'none', tag: 'tokens',
    summary: 'The token presented: its id, role, the agent it acts as (agent tokens), its grant and the tenants it reaches',
    response: whoamiAnswerSchema,
  }, async ({ principal }) => ({
    tokenId: principal!.tokenId, role: principal!.role, agentId: principal!.agentId, grant: principal!.grant, tenants: principal!.tenants ? [...principal!.tenants] : null,
  }));
}
