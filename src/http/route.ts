import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LIMITS } from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { jsonPathFormat, jsonProblem } from '../json-guard.js';
import type { Principal } from '../auth/tokens.js';
import type { Access } from '../auth/access.js';

export { ACCESS_ROLES, type Access } from '../auth/access.js';

export interface RouteSpec<B extends z.ZodType, Q extends z.ZodType> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  access: Access;
  summary: string;
  tag: string;
  body?: B;
  query?: Q;
  /** Extra request content types the body may come in (besides JSON). */
  bodyTypes?: string[];
  /** What a success returns, for the OpenAPI document. */
  responds?: string;
}

export interface RouteContext<B, Q> {
  req: FastifyRequest;
  reply: FastifyReply;
  principal: Principal | null;
  body: B;
  query: Q;
  params: Record<string, string>;
}

/** Every route registered through `route`: the OpenAPI document is generated from this list. */
export const routeRegistry: Array<RouteSpec<z.ZodType, z.ZodType>> = [];

/**
 * Register a route whose body and query are validated by zod schemas; a mismatch
 * is a 400 naming the field. The same schemas feed the OpenAPI document.
 */
export function route<B extends z.ZodType = z.ZodUndefined, Q extends z.ZodType = z.ZodUndefined>(
  app: FastifyInstance, spec: RouteSpec<B, Q>, handler: (c: RouteContext<z.infer<B>, z.infer<Q>>) => Promise<unknown> | unknown,
): void {
  if (!routeRegistry.some((r) => r.method === spec.method && r.url === spec.url)) routeRegistry.push(spec as RouteSpec<z.ZodType, z.ZodType>);
  app.route({
    method: spec.method,
    url: spec.url,
    config: { access: spec.access },
    // Fastify's per-request lines are at info: keep them out of the service log (the onResponse hook logs at debug).
    logLevel: 'warn',
    handler: async (req, reply) => {
      // Whatever a client sent, before any of it reaches a query: path params, query and body.
      hostileRefuse(req.params, 'params');
      hostileRefuse(req.query, 'query');
      hostileRefuse(req.body, 'body');
      const body = spec.body ? parseOr400(spec.body, req.body ?? {}, 'body') : undefined;
      const query = spec.query ? parseOr400(spec.query, req.query ?? {}, 'query') : undefined;
      const result = await handler({
        req, reply, principal: req.principal ?? null, body: body as z.infer<B>, query: query as z.infer<Q>,
        params: req.params as Record<string, string>,
      });
      if (reply.sent) return reply;
      return result;
    },
  });
}

/** A value PostgreSQL could not store, or nested too deep: a 400 naming the field, before anything runs. */
function hostileRefuse(value: unknown, where: string): void {
  const problem = jsonProblem(value, LIMITS.jsonDepth);
  if (problem) throw new InvalidInputError(`${jsonPathFormat(where, problem.path)}: ${problem.message}`, { field: jsonPathFormat(where, problem.path) });
}

function parseOr400<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = issue.path.length ? `${where}.${issue.path.join('.')}` : where;
  throw new InvalidInputError(`${path}: ${issue.message}`, { issues: r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) });
}

declare module 'fastify' {
  interface FastifyRequest { principal?: Principal | null }
  interface FastifyContextConfig { access?: Access }
}

/** Who did it, for events and DLQ resolutions: the token that asked. */
export function actor(p: Principal | null): string {
  return p ? `${p.role}:${p.agentId ?? p.tokenId}` : 'anonymous';
}
