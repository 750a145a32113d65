import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { cliWith } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));
/** An instant as every answer and `--json` sends it (Date.toISOString). */
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const dir = mkdtempSync(path.join(tmpdir(), 'dagent-limits-'));
const file = (name: string, text: string) => { const f = path.join(dir, name); writeFileSync(f, text); return f; };

describe('rate limits over HTTP', () => {
  it('an admin declares, lists and removes a model\'s limit; the claim obeys it and /metrics shows its window', async () => {
    const put = await http.call('PUT', `/api/rate-limits/${encodeURIComponent('openai/gpt-4o')}`, { body: { requests: 1, tokens: '300k', per: '1m' } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ key: 'openai/gpt-4o', requests: 1, tokens: 300_000, windowSec: 60, requestsUsed: 0, updatedAt: expect.stringMatching(ISO) });
    await dagCreate(db, 'name: m\ntasks:\n  a: { type: w, spec: { models: [openai/gpt-4o] } }\n  b: { type: w, spec: { models: [openai/gpt-4o] } }\n');
    await agentCreate(db, 'w', [], undefined, { models: ['openai/gpt-4o'] });
    expect(await taskClaim(db, 'w', { limit: 5 })).toHaveLength(1);

    const { token: read } = await tokenCreate(db, { role: 'read', name: 'viewer' });
    const list = await http.call('GET', '/api/rate-limits', { token: read });
    expect(list.body.rateLimits).toEqual([expect.objectContaining({ key: 'openai/gpt-4o', requestsUsed: 1, updatedAt: expect.stringMatching(ISO) })]);
    const metrics = (await http.call('GET', '/metrics')).body as string;
    expect(metrics).toContain('dagent_rate_limit_used{key="openai/gpt-4o",unit="requests"} 1');
    expect(metrics).toContain('dagent_rate_limit{key="openai/gpt-4o",unit="tokens"} 300000');

    expect((await http.call('DELETE', `/api/rate-limits/${encodeURIComponent('openai/gpt-4o')}`)).body).toEqual({ key: 'openai/gpt-4o', removed: true });
    expect(await taskClaim(db, 'w', { limit: 5 })).toHaveLength(1);
    expect((await http.call('DELETE', '/api/rate-limits/openai')).status).toBe(404);
  });

  it('an agent or read token cannot change a limit (403), a bad one is a 400 naming the field, and nothing changes', async () => {
    await http.call('PUT', '/api/rate-limits/acme', { body: { requests: 10 } });
    await agentCreate(db, 'w');
    const agent = await http.agentToken('w');
    const { token: read } = await tokenCreate(db, { role: 'read', name: 'viewer' });
    const before = await databaseSnapshot(db);
    for (const token of [agent, read]) {
      expect((await http.call('PUT', '/api/rate-limits/acme', { token, body: { requests: 100000 } })).status).toBe(403);
      expect((await http.call('DELETE', '/api/rate-limits/acme', { token })).status).toBe(403);
    }
    const bad = async (key: string, body: unknown) => {
      const r = await http.call('PUT', `/api/rate-limits/${encodeURIComponent(key)}`, { body });
      return [r.status, r.body.error.message];
    };
    expect(await bad('acme', { requests: -1 })).toEqual([400, expect.stringMatching(/^body\.requests/)]);
    expect(await bad('acme', { requests: 5, window: '1m' })).toEqual([400, expect.stringMatching(/^body: .*window/)]);
    expect(await bad('acme', {})).toEqual([400, 'body: set requests, tokens or both']);
    expect(await bad('acme', { tokens: 5, per: '0.5s' })).toEqual([400, expect.stringMatching(/^body\.per: must be whole seconds/)]);
    for (const per of ['abc', '', '2m30s', '1e400s']) expect(await bad('acme', { tokens: 5, per })).toEqual([400, expect.stringMatching(/^body\.per: /)]);
    expect(await bad('acme', { requests: '0.4' })).toEqual([400, 'body.requests: must be at least 1']);
    expect(await bad('not a model!', { requests: 1 })).toEqual([400, expect.stringMatching(/^key: must be a model/)]);
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('dagent limits', () => {
  it('set, list, apply a file (and --prune), rm', async () => {
    const set = await cli('limits', 'set', 'anthropic', '--requests', '50', '--tokens', '1.5m', '--per', '30s', '--default-tokens', '2k');
    expect([set.code, set.stdout.trim()]).toEqual([0, 'anthropic: 50 requests, 1500000 tokens per 30s']);
    const limits = file('limits.yaml', 'rate_limits:\n  openai/gpt-4o: { requests: 500, tokens: 300k }\n  openai: { requests: 2k }\n');
    const applied = await cli('limits', 'apply', limits, '--prune', '--json');
    expect(applied.code).toBe(0);
    expect(applied.json()).toEqual({ set: ['openai/gpt-4o', 'openai'], removed: ['anthropic'] });
    const list = await cli('limits', 'list', '--json');
    expect(list.json().rateLimits.map((l: { key: string; requests: number; tokens: number | null; windowSec: number; updatedAt: string }) => [l.key, l.requests, l.tokens, l.windowSec, l.updatedAt]))
      .toEqual([['openai', 2000, null, 60, expect.stringMatching(ISO)], ['openai/gpt-4o', 500, 300_000, 60, expect.stringMatching(ISO)]]);
    expect((await cli('limits', 'list')).stdout).toContain('openai/gpt-4o');
    expect((await cli('limits', 'rm', 'openai')).code).toBe(0);
    const gone = await cli('limits', 'rm', 'openai');
    expect([gone.code, gone.stderr]).toEqual([4, expect.stringContaining('rate limit openai not found')]);
  });

  it('the shipped limits file applies, and the example DAG that names those models runs under it', async () => {
    const r = await cli('limits', 'apply', path.resolve('dags/limits/providers.yaml'), '--json');
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.json().set).toEqual(['openai/gpt-4o', 'openai/gpt-4o-mini', 'anthropic']);
    const submitted = await cli('submit', path.resolve('dags/examples/model-fleet.yaml'), '--json');
    expect(submitted.code).toBe(0);
    await agentCreate(db, 'gpt', [], undefined, { models: ['openai/gpt-4o', 'openai/gpt-4o-mini'] });
    const [outline] = await taskClaim(db, 'gpt');
    expect([outline!.key, outline!.model]).toEqual(['outline', 'openai/gpt-4o']);
    const [usage] = await rowsOf<{ key: string; tokens_reserved: number }>(db, sql`select key, tokens_reserved from rate_usage`);
    expect(usage).toEqual({ key: 'openai/gpt-4o', tokens_reserved: 20_000 });
  });

  it('a bad limits file names the file, line and field, exits 2 and writes nothing', async () => {
    const before = await databaseSnapshot(db);
    const bad = file('bad.yaml', 'rate_limits:\n  openai/gpt-4o: { requests: 500 }\n  anthropic: { requests: 5, tokns: 10 }\n  "bad key": { requests: 1 }\n');
    const r = await cli('limits', 'apply', bad);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.yaml:3:\d+ rate_limits\.anthropic\.tokns: unknown field "tokns" \(did you mean "tokens"\?\)/);
    expect(r.stderr).toMatch(/bad\.yaml:4:\d+ rate_limits\.bad key.*must be a model/);
    const r2 = await cli('limits', 'set', 'acme', '--per', '1m');
    expect([r2.code, r2.stderr]).toEqual([2, 'error: set requests, tokens or both\n']);
    const r3 = await cli('limits', 'set', 'acme', '--tokens', '5', '--per', 'abc');
    expect([r3.code, r3.stderr]).toEqual([2, expect.stringMatching(/^error: per: must be a duration/)]);
    expect(r3.stderr).not.toContain('    at ');
    const r4 = await cli('limits', 'apply', file('bad-per.yaml', 'rate_limits:\n  acme: { tokens: 5, per: abc }\n'));
    expect([r4.code, r4.stderr]).toEqual([2, expect.stringMatching(/bad-per\.yaml:2:\d+ rate_limits\.acme\.per: must be a duration/)]);
    expect(await databaseSnapshot(db)).toBe(before);
    expect(await rowsOf(db, sql`select * from rate_limits`)).toEqual([]);
  });
});
