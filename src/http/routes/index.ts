import type { FastifyInstance } from 'fastify';
import type { HttpDeps } from '../deps.js';
import { agentRoutes } from './agents.js';
import { approvalRoutes } from './approvals.js';
import { dashboardRoutes } from './dashboard.js';
import { humanRoutes } from './humans.js';
import { logRoutes } from './logs.js';
import { mcpRoutes } from './mcp.js';
import { metricsRoutes } from './metrics.js';
import { openApiRoutes } from './openapi.js';
import { rateLimitRoutes } from './rate-limits.js';
import { rerunRoutes } from './rerun.js';
import { signalRoutes } from './signals.js';
import { streamRoutes } from './stream.js';
import { timelineRoutes } from './timeline.js';
import { whoamiRoutes } from './whoami.js';

/**
 * Every route module, registered on any Fastify instance (the server's, or a bare
 * one to generate the OpenAPI document). A new group of routes is one file in this
 * folder and one line here.
 */
const ROUTE_MODULES: Array<(app: FastifyInstance, deps: HttpDeps) => void> = [
  humanRoutes,
  timelineRoutes,
  rerunRoutes,
  signalRoutes,
  approvalRoutes,
  rateLimitRoutes,
  agentRoutes,
  whoamiRoutes,
  logRoutes,
  streamRoutes,
  mcpRoutes,
  metricsRoutes,
  openApiRoutes,
  dashboardRoutes,
];

export function routesRegister(app: FastifyInstance, deps: HttpDeps): void {
  for (const register of ROUTE_MODULES) register(app, deps);
}
