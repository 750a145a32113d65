import type { FastifyInstance } from 'fastify';
import type { HttpDeps } from '../deps.js';
import { agentProtocolRoutes } from './agent-protocol.js';
import { approvalRoutes } from './approvals.js';
import { costRoutes } from './costs.js';
import { dagRoutes } from './dags.js';
import { dashboardRoutes } from './dashboard.js';
import { dlqRoutes } from './dlq.js';
import { fleetRoutes } from './fleet.js';
import { mcpRoutes } from './mcp.js';
import { metricsRoutes } from './metrics.js';
import { openApiRoutes } from './openapi.js';
import { rateLimitRoutes } from './rate-limits.js';
import { signalRoutes } from './signals.js';
import { stepRoutes } from './steps.js';
import { streamRoutes } from './stream.js';
import { taskRoutes } from './tasks.js';
import { taskStreamRoutes } from './task-streams.js';
import { tenantRoutes } from './tenants.js';
import { usageRoutes } from './usage.js';
import { whoamiRoutes } from './whoami.js';

/**
 * Every route module, one per resource, registered on any Fastify instance (the server's, or a bare
 * one to generate the OpenAPI document). A new group of routes is one file in this folder and one line here.
 */
const ROUTE_MODULES: Array<(app: FastifyInstance, deps: HttpDeps) => void> = [
  dagRoutes,
  taskRoutes,
  stepRoutes,
  dlqRoutes,
  approvalRoutes,
  signalRoutes,
  rateLimitRoutes,
  fleetRoutes,
  tenantRoutes,
  costRoutes,
  agentProtocolRoutes,
  usageRoutes,
  whoamiRoutes,
  streamRoutes,
  taskStreamRoutes,
  mcpRoutes,
  metricsRoutes,
  openApiRoutes,
  dashboardRoutes,
];

export function routesRegister(app: FastifyInstance, deps: HttpDeps): void {
  for (const register of ROUTE_MODULES) register(app, deps);
}
