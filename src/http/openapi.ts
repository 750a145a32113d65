import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { answersJson, routeRegistry, type RouteResponse } from './route.js';

/** Each HTTP status an error can have, with the codes that give it and what they mean (from ERROR_CODES). */
const ERROR_RESPONSES: Record<string, string> = {};
for (const [code, def] of Object.entries(ERROR_CODES) as Array<[ErrorCode, (typeof ERROR_CODES)[ErrorCode]]>) {
  if (def.status === null) continue;
  const line = `- \`${code}\`: ${def.description}`;
  ERROR_RESPONSES[def.status] = ERROR_RESPONSES[def.status] ? `${ERROR_RESPONSES[def.status]}\n${line}` : line;
}
/** Statuses only a request with a body can get. */
const BODY_STATUSES = [String(ERROR_CODES.BODY_TOO_LARGE.status), String(ERROR_CODES.UNSUPPORTED_MEDIA_TYPE.status)];
/** Statuses only a route that needs a token can get. */
const TOKEN_STATUSES = [String(ERROR_CODES.UNAUTHORIZED.status), String(ERROR_CODES.FORBIDDEN.status)];

/**
 * A success's content: a JSON route's response schema as JSON Schema (as sent: instants are strings), or the media
 * types another route answers with. An object may gain fields in a later version (no `additionalProperties: false`,
 * unless its schema is strict): a client ignores what it does not know. The shapes the wire schemas name
 * (`.meta({ id })`: TaskView, DagView, …) go to `components.schemas` once, in `shared`, and are referred to there.
 */
function contentOf(r: RouteResponse, shared: Record<string, unknown>): Record<string, unknown> {
  if (!answersJson(r)) return Object.fromEntries(r.contentTypes.map((t) => [t, { schema: { type: 'string', description: r.description } }]));
  const { $defs, $schema: _, ...schema } = z.toJSONSchema(r, {
    io: 'output', unrepresentable: 'any',
    override: (ctx) => {
      const def = (ctx.zodSchema as unknown as { _zod: { def: { type: string; catchall?: unknown } } })._zod.def;
      if (def.type === 'object' && def.catchall === undefined) delete (ctx.jsonSchema as { additionalProperties?: unknown }).additionalProperties;
    },
  });
  const toComponents = <T>(s: T): T => JSON.parse(JSON.stringify(s).replaceAll('"#/$defs/', '"#/components/schemas/')) as T;
  for (const [id, def] of Object.entries($defs ?? {})) shared[id] = toComponents(def);
  return { 'application/json': { schema: toComponents(schema) } };
}

/** OpenAPI 3.1 from the registered routes and their zod schemas (z.toJSONSchema). */
export function openApiDocument() {
  const paths: Record<string, Record<string, unknown>> = {};
  const shared: Record<string, unknown> = {};
  for (const r of routeRegistry) {
    const url = r.url.replace(/:([a-z_]+)/g, '{$1}');
    const parameters: unknown[] = [...r.url.matchAll(/:([a-z_]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    if (r.query) {
      const js = z.toJSONSchema(r.query, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(js.properties ?? {})) parameters.push({ name, in: 'query', required: js.required?.includes(name) ?? false, schema });
    }
    const op: Record<string, unknown> = {
      summary: r.summary,
      tags: [r.tag],
      parameters,
      security: r.access === 'public' ? [] : [{ bearer: [] }],
      'x-dagent-access': r.access,
      responses: {
        ...Object.fromEntries(Object.entries(r.successStatuses ?? { 200: 'success' }).map(([status, description]) => [status, { description, content: contentOf(r.response, shared) }])),
        ...Object.fromEntries(Object.entries(ERROR_RESPONSES)
          .filter(([status]) => (r.access !== 'public' || !TOKEN_STATUSES.includes(status)) && (r.body || !BODY_STATUSES.includes(status)))
          .map(([code, description]) => [code, { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } }])),
      },
    };
    if (r.body) {
      const schema = z.toJSONSchema(r.body, { io: 'input', unrepresentable: 'any' });
      const content: Record<string, unknown> = { 'application/json': { schema } };
      for (const t of r.bodyTypes ?? []) content[t] = { schema: { type: 'string' } };
      op.requestBody = { required: !r.body.safeParse(undefined).success, content };
    }
    (paths[url] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'dagent HTTP API', version: '0.1.0', description: 'See docs/http-api.md. Errors are {error: {code, message, ...}}.' },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'dagent tokens create --role admin|submit|read|agent [--agent ID --capabilities …]' } },
      schemas: {
        Error: {
          type: 'object',
          properties: {
            error: {
              type: 'object',
              properties: { code: { type: 'string', enum: Object.keys(ERROR_CODES).filter((c) => ERROR_CODES[c as ErrorCode].status !== null) }, message: { type: 'string' } },
              required: ['code', 'message'],
            },
          },
        },
        ...Object.fromEntries(Object.entries(shared).sort(([a], [b]) => a.localeCompare(b))),
      },
    },
    paths,
  };
}
