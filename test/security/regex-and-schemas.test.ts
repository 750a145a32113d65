import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { schemaCacheSize, schemaCompile } from '../../src/validation/schema-compiler.js';
import { innocentBystander } from './helpers/innocent.js';
import { httpAgent } from './helpers/agent.js';
import { refused, serverStart } from './helpers/server.js';

// Finding 4: a pattern with catastrophic backtracking froze the server's event loop.
// Finding 5: JSON Schemas shared one ajv instance: a schema's $id squatted another DAG's,
// and once a few hundred schemas had been compiled, valid outputs were rejected.
const database = await testDatabase();
const server = await serverStart(database);

const submit = (yaml: string) => server.submit(yaml);

describe('regular expressions run in linear time', () => {
  it('(a+)+$ against sixty a\'s and a "!" is a quick rejection, in a regex step and in a JSON Schema pattern; the server keeps answering and an innocent DAG loses nothing', async () => {
    const innocent = await innocentBystander(server, database, 'beside-redos');
    const dagId = await submit(`
name: redos
tasks:
  text: { type: w, spec: { constraints: { capabilities: [w] } }, max_attempts: 1, output: { validation: { kind: regex, pattern: "(a+)+$" } } }
  json:
    type: w
    max_attempts: 1
    spec: { constraints: { capabilities: [w] } }
    output: { validation: { kind: json-schema, schema: { type: object, properties: { s: { type: string, pattern: "(a+)+$" } } } } }
`);
    const evil = `${'a'.repeat(60)}!`;
    const agent = await httpAgent(server, database.db, 'redos-agent', { capabilities: ['w'] });
    for (const output of [evil, { s: evil }]) {
      const [t] = await agent.claim(dagId, 1);
      const r = await server.call('POST', `/api/tasks/${t!.id}/complete`, { token: agent.token, body: { fence: t!.fence, output } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.settled.status).toBe('rejected');
      expect((await server.call('GET', '/healthz', { token: null, timeoutMs: 5_000 })).status).toBe(200);
    }
    await innocent.finish();
  });

  it('a pattern the linear-time engine cannot run (a backreference, a lookahead) is refused at submit, naming the field', async () => {
    await refused(400, 'DAG_INVALID', server.call('POST', '/api/dags', {
      raw: 'name: back\ntasks:\n  a: { type: w, output: { validation: { kind: regex, pattern: "^(a+)\\\\1$" } } }\n', contentType: 'application/yaml',
    }), /tasks\.a\.output\.validation\.pattern: .*backreferences are not supported/);
  });
});

describe('what an agent sends is checked in time linear in its size', () => {
  it('a url of 150,000 colons against format: url, and 150,000 distinct items against uniqueItems, are settled while /healthz keeps answering', async () => {
    const innocent = await innocentBystander(server, database, 'beside-quadratic');
    const dagId = await submit(`
name: quadratic
tasks:
  link: { type: w, max_attempts: 1, spec: { constraints: { capabilities: [q] } }, output: { validation: { kind: json-schema, schema: { type: string, format: url } } } }
  list: { type: w, max_attempts: 1, spec: { constraints: { capabilities: [q] } }, output: { validation: { kind: json-schema, schema: { type: array, uniqueItems: true } } } }
`);
    const agent = await httpAgent(server, database.db, 'quadratic-agent', { capabilities: ['q'] });
    const held = await agent.claim(dagId, 2);
    const byKey = Object.fromEntries(held.map((t) => [t.key, t]));
    // ajv-formats' url regex is quadratic (80,000 colons: 12 s); ajv compares every pair of items (2·10^10 here).
    const settle = (key: string, output: unknown) => server.call('POST', `/api/tasks/${byKey[key]!.id}/complete`, { token: agent.token, body: { fence: byKey[key]!.fence, output } });
    const link = settle('link', `http://${':'.repeat(150_000)}`);
    const list = settle('list', [...Array.from({ length: 150_000 }, (_, i) => i), 7]);
    // While both are in flight, the server keeps answering (a stalled event loop would not, for tens of seconds).
    let inFlight = true;
    const both = Promise.all([link, list]).finally(() => { inFlight = false; });
    while (inFlight) {
      expect((await server.call('GET', '/healthz', { token: null, timeoutMs: 5_000 })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    const [l, u] = await both;
    expect(l.body.settled).toMatchObject({ status: 'rejected', verdict: { reasons: ['/ must match format "url"'] } });
    expect(u.body.settled).toMatchObject({ status: 'rejected', verdict: { reasons: ['/ must NOT have duplicate items (items ## 7 and 150000 are identical)'] } });
    await innocent.finish();
  });
});

describe('JSON Schemas are isolated per schema', () => {
  const withId = (name: string, required: string) => `
name: ${name}
tasks:
  t: { type: w, max_attempts: 1, spec: { constraints: { capabilities: [w] } }, output: { validation: { kind: json-schema, schema: { $id: "https://example.com/shared.json", type: object, required: [${required}] } } } }
`;

  it('two DAGs may use the same $id for different schemas; each output is checked against its own DAG\'s schema', async () => {
    const a = await submit(withId('squat-a', 'a'));
    const b = await submit(withId('squat-b', 'b'));
    const agent = await httpAgent(server, database.db, 'squat-agent', { capabilities: ['w'] });
    const [ta] = await agent.claim(a, 1);
    expect((await server.call('POST', `/api/tasks/${ta!.id}/complete`, { token: agent.token, body: { fence: ta!.fence, output: { a: 1 } } })).body.settled.status).toBe('completed');
    const [tb] = await agent.claim(b, 1);
    expect((await server.call('POST', `/api/tasks/${tb!.id}/complete`, { token: agent.token, body: { fence: tb!.fence, output: { a: 1 } } })).body.settled.status).toBe('rejected');
  });

  it('a schema cannot $ref another DAG\'s $id: refused at submit', async () => {
    await submit(withId('ref-target', 'a'));
    await refused(400, 'DAG_INVALID', server.call('POST', '/api/dags', {
      raw: 'name: ref\ntasks:\n  t: { type: w, output: { validation: { kind: json-schema, schema: { $ref: "https://example.com/shared.json" } } } }\n', contentType: 'application/yaml',
    }), /can't resolve reference/);
  });

  it('after 600 distinct schemas with $id, a valid output of the first DAG is still accepted', async () => {
    const first = await submit(withId('many-0', 'k0').replace('shared.json', 'many-0.json'));
    for (let i = 1; i < 600; i++) await submit(withId(`many-${i}`, `k${i}`).replace('shared.json', `many-${i}.json`));
    const agent = await httpAgent(server, database.db, 'many-agent', { capabilities: ['w'] });
    const [t] = await agent.claim(first, 1);
    const r = await server.call('POST', `/api/tasks/${t!.id}/complete`, { token: agent.token, body: { fence: t!.fence, output: { k0: true } } });
    expect(r.body.settled, JSON.stringify(r.body)).toEqual(expect.objectContaining({ status: 'completed' }));
  }, 120_000);

  it('the compiled-schema cache is bounded: compiling 1,000 distinct schemas keeps at most 500', () => {
    for (let i = 0; i < 1000; i++) expect(schemaCompile({ $id: `https://example.com/bounded-${i}.json`, type: 'object', required: [`f${i}`] })).not.toHaveProperty('error');
    expect(schemaCacheSize()).toBeLessThanOrEqual(500);
    // The first, evicted long ago, compiles again with its $id: nothing of it stayed registered.
    expect(schemaCompile({ $id: 'https://example.com/bounded-0.json', type: 'object', required: ['f0'] })).not.toHaveProperty('error');
  });
});
