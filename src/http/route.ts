import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LIMITS } from '../config/index.js';
import { InternalError, InvalidInputError } from '../errors.js';
import { jsonPathFormat, jsonProblem } from '../json-guard.js';
import type { Principal } from '../auth/tokens.js';
import type { Access, TenantReach } from '../auth/access.js';

export { ACCESS_ROLES, type Access } from '../auth/access.js';

/**
 * What a route answers that is not a JSON document (a page, a stream, metrics text, MCP's JSON-RPC): its media type,
 * and what it holds in words, for the OpenAPI document. Every other route declares the zod schema of its JSON.
 */
export interface OtherContent {
  /** The media types it may answer with (none: an empty body). */
  readonly contentTypes: readonly string[];
  readonly description: string;
}

/** A route's answer: the zod schema of the JSON body as sent, or what else it sends. */
export type RouteResponse = z.ZodType | OtherContent;

/**
 * What a handler returns for its route's answer: for a JSON route, the input of its response schema (an instant as
 * the Date the engine gives, which JSON sends as text; see wire/instant.ts), so a changed engine type fails the type
 * check; for any other route, whatever it writes itself.
 */
export type RouteAnswer<R extends RouteResponse> = R extends z.ZodType ? z.input<R> : unknown;

export interface RouteSpec<B extends z.ZodType, Q extends z.ZodType, R extends RouteResponse = RouteResponse> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  access: Access;
  /** Which tenant's objects it reaches (auth/access.ts): a token scoped to tenants reaches its own only. */
  tenants: TenantReach;
  summary: string;
  tag: string;
  body?: B;
  query?: Q;
  /** Extra request content types the body may come in (besides JSON). */
  bodyTypes?: string[];
  /** What a success answers: the zod schema of its JSON (the OpenAPI document publishes it), or `otherContent(…)`. */
  response: R;
  /** The statuses a success answers with, each with when. Default `{200: 'success'}`. */
  successStatuses?: { 200?: string; 201?: string };
}

/** A route that answers something other than a JSON document (see OtherContent). */
export function otherContent(contentTypes: readonly string[], description: string): OtherContent {
  return { contentTypes, description };
}

/** True for a route whose answer is a JSON document, described by its zod schema. */
export function answersJson(r: RouteResponse): r is z.ZodType {
  return r instanceof z.ZodType;
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
 * From now on, routes registered on `app` (and its child contexts) parse each JSON answer against their response
 * schema before it is sent, and answer a mismatch with a 500 naming the route and the field: what the tests' servers
 * do (test/helpers/http.ts, and `dagent up` under DAGENT_CHECK_RESPONSES), so a response that drifts from its schema
 * fails the route's own tests. Production sends what the handler returned, unparsed.
 */
export function routeResponsesCheck(app: FastifyInstance): void {
  if (!app.hasDecorator('dagentResponsesChecked')) app.decorate('dagentResponsesChecked', true);
}

/**
 * Register a route whose body and query are validated by zod schemas (a mismatch is a 400 naming the field) and whose
 * answer is typed by its response schema. The same schemas feed the OpenAPI document.
 */
export function route<B extends z.ZodType = z.ZodUndefined, Q extends z.ZodType = z.ZodUndefined, R extends RouteResponse = RouteResponse>(
  app: FastifyInstance, spec: RouteSpec<B, Q, R>, handler: (c: RouteContext<z.infer<B>, z.infer<Q>>) => Promise<RouteAnswer<R>> | RouteAnswer<R>,
): void {
  if (!routeRegistry.some((r) => r.method === spec.method && r.url === spec.url)) routeRegistry.push(spec as RouteSpec<z.ZodType, z.ZodType>);
  const checked = app.dagentResponsesChecked === true && answersJson(spec.response) ? spec.response : undefined;
  app.route({
    method: spec.method,
    url: spec.url,
    config: { access: spec.access, tenants: spec.tenants },
    // Fastify's per-request lines are at info: keep them out of the service log (the onResponse hook logs at debug).
    logLevel: 'warn',
    handler: async (req, reply) => {
      // Whatever a client sent, before any of it reaches a query: path params, query and body.
      hostileRefuse(req.params, 'params');
      hostileRefuse(req.query, 'query');
      hostileRefuse(req.body, 'body');
      const body = spec.body ? parseOr400(spec.body, req.body ?? {}, 'body') : undefined;
      const query = spec.query ? parseOr400(spec.query, req.query ?? {}, 'query') : undefined;
      // A token scoped to tenants: another tenant's object named in the path is a 404 (auth/tenant-reach.ts).
      await req.tenantObjectsCheck?.();
      const result = await handler({
        req, reply, principal: req.principal ?? null, body: body as z.infer<B>, query: query as z.infer<Q>,
        params: req.params as Record<string, string>,
      });
      if (reply.sent) return reply;
      if (checked) answerCheck(`${spec.method} ${spec.url}`, checked, result);
      return result;
    },
  });
}

/**
 * Throws (a 500 naming the route and the field) unless `result`, sent as JSON, is what `schema` describes: the schema
 * accepts it, and keeps all of it (a field the schema does not name would be stripped by the parse, and is refused).
 */
function answerCheck(which: string, schema: z.ZodType, result: unknown): void {
  const r = schema.safeParse(result);
  const problem = r.success ? jsonDifference(jsonOf(result), jsonOf(r.data), 'answer')
    : r.error.issues.map((i) => `${jsonPathFormat('answer', i.path as Array<string | number>)}: ${i.message}`).join('; ');
  if (problem) throw new InternalError(`${which} answered what its response schema does not describe: ${problem}`);
}

function jsonOf(v: unknown): unknown {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

/** Where the JSON `sent` differs from `described` (its parse), first found; null when they are the same. */
function jsonDifference(sent: unknown, described: unknown, at: string): string | null {
  if (Array.isArray(sent) && Array.isArray(described)) {
    if (sent.length !== described.length) return `${at}: ${sent.length} items, the schema keeps ${described.length}`;
    for (let i = 0; i < sent.length; i++) {
      const d = jsonDifference(sent[i], described[i], `${at}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (isPlainObject(sent) && isPlainObject(described)) {
    for (const k of Object.keys(sent)) {
      if (!Object.hasOwn(described, k)) return `${at}.${k}: a field the schema does not name`;
      const d = jsonDifference(sent[k], described[k], `${at}.${k}`);
      if (d) return d;
    }
    for (const k of Object.keys(described)) if (!Object.hasOwn(sent, k)) return `${at}.${k}: the schema adds a field that was not sent`;
    return null;
  }
  return Object.is(sent, described) ? null : `${at}: sent ${JSON.stringify(sent)}, the schema makes it ${JSON.stringify(described)}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
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
  interface FastifyRequest {
    principal?: Principal | null;
    /** Set by the server once the token is known: refuses another tenant's objects named in the path (a 404). */
    tenantObjectsCheck?: () => Promise<void>;
  }
  interface FastifyContextConfig { access?: Access; tenants?: TenantReach }
  interface FastifyInstance { dagentResponsesChecked?: boolean }
}

/** Who did it, for events and DLQ resolutions: the token that asked. */
export function actor(p: Principal | null): string {
  return p ? `${p.role}:${p.agentId ?? p.tokenId}` : 'anonymous';
}
