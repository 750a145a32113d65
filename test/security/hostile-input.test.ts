import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { cliWith } from '../helpers/cli.js';
import { databaseReset, databaseSnapshot } from '../helpers/factories.js';

// Finding 10: strings PostgreSQL cannot store, deep nesting, bytes that are not UTF-8 and
// names every JavaScript object already has, sent by a client: a 400 naming the field (the
// CLI: exit 2), never a 500, a stack or a driver's dump; nothing is written.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

async function refused(status: number, code: string, req: () => Promise<{ status: number; body: any }>, field?: RegExp) {
  const before = await databaseSnapshot(db);
  const r = await req();
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.body.error.code).toBe(code);
  if (field) expect(r.body.error.message).toMatch(field);
  expect(await databaseSnapshot(db)).toBe(before);
  return r;
}

/** Raw bytes to the server, bypassing fetch's own encoding. */
function rawRequest(method: string, urlPath: string, body: Buffer | null, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const { hostname, port } = new URL(http.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path: urlPath, method, headers: { authorization: `Bearer ${http.adminToken}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try { parsed = JSON.parse(text); } catch { /* leave as text */ }
        resolve({ status: res.statusCode!, body: parsed });
      });
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

describe('hostile strings over HTTP', () => {
  it('a NUL byte in a JSON string is a 400 naming the field, not a 500', async () => {
    await refused(400, 'INVALID_INPUT', () => http.call('POST', '/api/dags', { body: { dag: { name: 'nul', title: 'a\u0000b', tasks: { a: { type: 't' } } } } }), /body\.dag\.title: .*NUL/);
    await refused(400, 'DAG_INVALID', () => http.call('POST', '/api/dags', { raw: 'name: nul\ntitle: "a\\0b"\ntasks:\n  a: { type: t }\n', contentType: 'application/yaml' }), /request\.yaml:2:\d+ title: .*NUL/);
  });

  it('an unpaired surrogate in JSON is a 400 naming the field', async () => {
    await refused(400, 'INVALID_INPUT', () => http.call('POST', '/api/dags', { raw: '{"dag": {"name": "s", "title": "\\ud800", "tasks": {"a": {"type": "t"}}}}' }), /body\.dag\.title: .*surrogate/);
  });

  it('JSON nested 100,000 deep is a 400, and the server goes on answering', async () => {
    const deep = `{"dag": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    await refused(400, 'INVALID_INPUT', () => http.call('POST', '/api/dags', { raw: deep }), /nested deeper than 64/);
    expect((await http.call('GET', '/healthz', { token: null })).status).toBe(200);
  });

  it('a body that is not UTF-8 is a 400 naming the byte', async () => {
    const bytes = Buffer.concat([Buffer.from('{"dag": {"name": "x", "title": "'), Buffer.from([0xc3, 0x28]), Buffer.from('"}}')]);
    await refused(400, 'INVALID_INPUT', () => rawRequest('POST', '/api/dags', bytes, { 'content-type': 'application/json' }), /not valid UTF-8 \(byte 32\)/);
  });

  it('__proto__ and constructor.prototype keys are refused, in the API\'s error shape', async () => {
    await refused(400, 'BAD_REQUEST', () => http.call('POST', '/api/dags', { raw: '{"dag": {"name": "p", "tasks": {"a": {"type": "t"}}}, "__proto__": {"admin": true}}' }));
    await refused(400, 'BAD_REQUEST', () => http.call('POST', '/api/dags', { raw: '{"dag": {"name": "p", "tasks": {"a": {"type": "t"}}}, "constructor": {"prototype": {"x": 1}}}' }));
  });

  it('params and task keys named like Object.prototype members (toString, constructor, __proto__) are a 400 naming them', async () => {
    const declared = (name: string) => `name: p\nparams:\n  ${name}: a\ntasks:\n  t1: { type: t, spec: { prompt: "\${params.${name}}" } }\n`;
    await refused(400, 'DAG_INVALID', () => http.call('POST', '/api/dags', { body: { yaml: declared('toString'), params: { toString: 'x' } } }), /params.*"toString" is a reserved name/);
    await refused(400, 'DAG_INVALID', () => http.call('POST', '/api/dags', { raw: declared('constructor'), contentType: 'application/yaml' }), /"constructor" is a reserved name/);
    await refused(400, 'DAG_INVALID', () => http.call('POST', '/api/dags?param=__proto__=x', { raw: declared('x'), contentType: 'application/yaml' }), /--param __proto__: .*reserved/);
    await refused(400, 'DAG_INVALID', () => http.call('POST', '/api/dags', { raw: 'name: k\ntasks:\n  constructor: { type: t }\n', contentType: 'application/yaml' }), /"constructor" is a reserved name/);
    await refused(400, 'DAG_INVALID', () => http.call('POST', '/api/dags', { raw: 'name: k\ntasks:\n  a: { type: t, depends_on: [constructor] }\n', contentType: 'application/yaml' }), /unknown task "constructor"|reserved/);
  });

  it('NUL in a query or a path parameter is a 400 naming it', async () => {
    await refused(400, 'INVALID_INPUT', () => http.call('GET', '/api/tasks?dag_id=%00'), /query\.dag_id/);
    await refused(400, 'INVALID_INPUT', () => http.call('GET', '/api/tasks/%00'), /params\.id/);
  });

  it('a malformed URL, an overlong path parameter and oversized headers are answered in the API\'s error shape', async () => {
    await refused(400, 'BAD_REQUEST', () => rawRequest('GET', '/api/tasks/%E0%A4%A', null, {}));
    await refused(414, 'URI_TOO_LONG', () => rawRequest('GET', `/api/tasks/${'x'.repeat(2_401)}`, null, {}));
    const big = await rawRequest('GET', '/api/dags', null, { 'x-padding': 'x'.repeat(40_000) });
    expect(big.status).toBe(431);
    expect(big.body.error.code).toBe('HEADERS_TOO_LARGE');
  });

  it('accepts the bearer scheme in any case (RFC 7235)', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
      const r = await rawRequest('GET', '/api/dags', null, { authorization: `${scheme} ${http.adminToken}` });
      expect(r.status, scheme).toBe(200);
    }
  });
});

describe('hostile strings through the CLI', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dagent-hostile-'));

  it('a NUL in a DAG file\'s title exits 2 naming file:line:column and the field; no driver dump', async () => {
    const file = path.join(dir, 'nul.yaml');
    writeFileSync(file, 'name: nul\ntitle: "a\\0b"\ntasks:\n  a: { type: t }\n');
    const before = await databaseSnapshot(db);
    const r = await cli('submit', file);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/nul\.yaml:2:8 title: contains a NUL character/);
    expect(r.stderr).not.toMatch(/at .*\.ts:\d+|error: error|invalid byte sequence/);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('a DAG file that is not UTF-8 exits 2 naming the line and column of the first bad byte', async () => {
    const file = path.join(dir, 'latin1.yaml');
    writeFileSync(file, Buffer.concat([Buffer.from('name: l\ntitle: caf'), Buffer.from([0xe9]), Buffer.from('\ntasks:\n  a: { type: t }\n')]));
    const r = await cli('submit', file);
    expect(r.code).toBe(2);
    expect(r.stderr, r.stderr).toMatch(/latin1\.yaml:2:11 not valid UTF-8/);
  });

  it('a --param named toString exits 2 naming it', async () => {
    const file = path.join(dir, 'p.yaml');
    writeFileSync(file, 'name: p\nparams: { who: a }\ntasks:\n  a: { type: t, spec: { prompt: "${params.who}" } }\n');
    const r = await cli('submit', file, '--param', 'toString=x');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--param toString: "toString" is a reserved name/);
  });
});
