// Every JSON route declares the schema of its answer (src/http/route.ts): TypeScript holds the handler to it, the
// test servers parse every answer against it, and the OpenAPI document publishes it.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { answersJson, route, routeRegistry, routeResponsesCheck } from '../../src/http/route.js';
import { openApiDocumentBuild } from '../../src/http/server.js';
import { instant } from '../../src/wire/instant.js';

/** What GET /answer answers on a bare Fastify with one route whose handler returns `answer`, its response schema `{n: number, at: instant}`. */
async function answerOf(answer: unknown, checked: boolean) {
  const app = Fastify();
  if (checked) routeResponsesCheck(app);
  route(app, {
    method: 'GET', url: '/answer', access: 'public', tenants: 'none', tag: 'test', summary: 'answers what the test says',
    response: z.object({ n: z.number(), at: instant }),
    // What TypeScript refuses (see route.ts RouteAnswer), as a drifted engine would send it.
  }, () => answer as never);
  try {
    return await app.inject({ method: 'GET', url: '/answer' });
  } finally {
    await app.close();
  }
}

describe('a route\'s answer and its response schema', () => {
  it('an answer the schema describes goes out as it was returned, its instants as ISO text', async () => {
    const at = new Date('2026-11-27T09:30:00.000Z');
    const r = await answerOf({ n: 1, at }, true);
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ n: 1, at: '2026-11-27T09:30:00.000Z' });
  });

  it('checked (the tests\' servers), an answer the schema refuses is a 500 naming the route and the field', async () => {
    const wrongType = await answerOf({ n: 'one', at: new Date() }, true);
    expect(wrongType.statusCode).toBe(500);
    expect(wrongType.json().message).toMatch(/^GET \/answer answered what its response schema does not describe: answer\.n: /);

    // An instant the engine gave as text where the schema says Date: JSON would send another form than the schema's.
    const textInstant = await answerOf({ n: 1, at: '2026-11-27 09:30:00+00' }, true);
    expect(textInstant.statusCode).toBe(500);
    expect(textInstant.json().message).toContain('answer.at');
  });

  it('checked, a field the schema does not name is a 500 too (the schema would hide it from the contract)', async () => {
    const r = await answerOf({ n: 1, at: new Date(), extra: { deep: true } }, true);
    expect(r.statusCode).toBe(500);
    expect(r.json().message).toContain('answer.extra: a field the schema does not name');
  });

  it('unchecked (production), the answer goes out unparsed', async () => {
    const r = await answerOf({ n: 'one', at: 'whenever' }, false);
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ n: 'one', at: 'whenever' });
  });
});

describe('the OpenAPI document\'s answers', () => {
  it('publishes the response schema of every JSON route, and the media types of the others', async () => {
    const doc = await openApiDocumentBuild() as {
      paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: Record<string, unknown> }> }> }>>;
      components: { schemas: Record<string, Record<string, unknown>> };
    };
    /** A schema, or the shared one its $ref names (which must exist). */
    const resolved = (s: Record<string, unknown>) => {
      if (typeof s.$ref !== 'string') return s;
      const shared = doc.components.schemas[s.$ref.replace('#/components/schemas/', '')];
      expect(shared, s.$ref).toBeDefined();
      return shared!;
    };
    const registered = routeRegistry.filter((r) => r.tag !== 'test');
    expect(registered.filter((r) => answersJson(r.response)).length).toBeGreaterThan(40);
    for (const r of registered) {
      const op = doc.paths[r.url.replace(/:([a-z_]+)/g, '{$1}')]![r.method.toLowerCase()]!;
      const success = Object.entries(op.responses).filter(([status]) => status.startsWith('2'));
      expect(success.length, `${r.method} ${r.url}: a success status`).toBeGreaterThan(0);
      for (const [status, answer] of success) {
        const what = `${r.method} ${r.url} ${status}`;
        if (answersJson(r.response)) {
          expect(answer.content?.['application/json']?.schema, what).toBeDefined();
          const schema = resolved(answer.content!['application/json']!.schema!);
          // A schema that says something: an object with its fields, or a union of those.
          expect(schema!.type === 'object' ? Object.keys(schema!.properties as object).length : (schema!.anyOf as unknown[]).length, what).toBeGreaterThan(0);
        } else {
          expect(Object.keys(answer.content ?? {}), what).toEqual(r.response.contentTypes);
        }
      }
    }
    // What an HTTP agent in another language reads: the claimed task's fields, its instants as text.
    const claim = doc.paths['/api/agents/{id}/claim']!.post!.responses['200']!.content!['application/json']!.schema as any;
    const claimed = resolved(claim.properties.tasks.items) as any;
    expect(claimed.required).toEqual(expect.arrayContaining(['id', 'fence', 'spec', 'leaseExpiresAt', 'inputs']));
    expect(claimed.properties.leaseExpiresAt).toMatchObject({ type: 'string', format: 'date-time' });
    expect(Object.keys(doc.paths['/api/dags']!.post!.responses)).toEqual(expect.arrayContaining(['200', '201']));
  });
});
