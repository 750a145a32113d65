import type { FastifyInstance } from 'fastify';
import { modelPauseList } from '../../db/queries/model-pauses.js';
import { rateLimitBodySchema, rateLimitList, rateLimitRemove, rateLimitSet } from '../../engine/ops/rate-limits.js';
import { rateLimitListAnswerSchema, rateLimitRemoveAnswerSchema, rateLimitViewSchema } from '../../wire/rate-limits.js';
import { route } from '../route.js';
import type { HttpDeps } from '../deps.js';

/** Rate limits declared for models and providers: read by anyone who reads, changed by admins only. */
export function rateLimitRoutes(app: FastifyInstance, d: HttpDeps): void {
  const tag = 'rate limits';
  route(app, {
    method: 'GET', url: '/api/rate-limits', access: 'read', tenants: 'deployment', tag,
    summary: 'The declared rate limits with what their current window holds, and the models or providers paused by a 429',
    response: rateLimitListAnswerSchema,
  }, async () => ({ rateLimits: await rateLimitList(d.db), paused: (await modelPauseList(d.db)).filter((p) => p.remainingSec > 0) }));

  route(app, {
    method: 'PUT', url: '/api/rate-limits/:key', access: 'admin', tenants: 'deployment', tag,
    body: rateLimitBodySchema,
    summary: 'Declare or change the rate limit of a model (openai%2Fgpt-4o, the slash encoded) or a provider (openai); the next claim obeys it; answers the limit as listed',
    response: rateLimitViewSchema,
  }, async ({ params, body }) => rateLimitSet(d.db, params.key!, body, { log: d.log }));

  route(app, {
    method: 'DELETE', url: '/api/rate-limits/:key', access: 'admin', tenants: 'deployment', tag,
    summary: 'Remove a declared rate limit; 404 when none is declared', response: rateLimitRemoveAnswerSchema,
  }, async ({ params }) => {
    await rateLimitRemove(d.db, params.key!, { log: d.log });
    return { key: params.key!, removed: true as const };
  });
}
