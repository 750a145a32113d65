import { z } from 'zod';
import { routeRegistry } from './route.js';

const ERROR_RESPONSES = {
  400: 'malformed body or query, or invalid input (the message names the field)',
  401: 'no token, or an invalid or revoked one',
  403: 'the token\'s role or agent may not do this',
  404: 'no such resource',
  409: 'stale fencing token, or a state that does not allow this',
  413: 'body larger than the limit',
  429: 'queue full (backpressure); see Retry-After',
};

/** OpenAPI 3.1 from the registered routes and their zod schemas (z.toJSONSchema). */
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
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
        200: { description: r.responds ?? 'success' },
        ...Object.fromEntries(Object.entries(ERROR_RESPONSES)
          .filter(([code]) => (r.access !== 'public' || !['401', '403'].includes(code)) && (r.body || !['413'].includes(code)))
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
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'dagent tokens create --role admin|agent [--agent ID]' } },
      schemas: { Error: { type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } }, required: ['code', 'message'] } } } },
    },
    paths,
  };
}
