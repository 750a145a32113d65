import { writeFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { cliWith } from '../helpers/cli.js';
import { databaseReset, databaseSnapshot } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-http-cli-'));
const file = path.join(dir, 'two.yaml');
writeFileSync(file, 'name: two\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');

describe('dagent tokens', () => {
  it('creates an admin token that the API accepts, lists it without its secret, and revokes it', async () => {
    const http = await testHttp(database);
    const created = await cli('tokens', 'create', '--role', 'admin', '--name', 'ops', '--json');
    expect(created.code).toBe(0);
    const { id, token } = created.json();
    expect((await http.call('GET', '/api/dags', { token })).status).toBe(200);
    const list = await cli('tokens', 'list', '--json');
    expect(list.json().find((t: { id: string }) => t.id === id)).toMatchObject({ role: 'admin', name: 'ops', revokedAt: null });
    expect(list.stdout).not.toContain(token);
    expect((await cli('tokens', 'revoke', id)).code).toBe(0);
    expect((await http.call('GET', '/api/dags', { token })).status).toBe(401);
  });

  it('refuses an agent token without an agent, and a bad role (exit 2, nothing written)', async () => {
    const before = await databaseSnapshot(db);
    const noAgent = await cli('tokens', 'create', '--role', 'agent');
    expect(noAgent.code).toBe(2);
    expect(noAgent.stderr).toMatch(/--agent/);
    expect((await cli('tokens', 'create', '--role', 'root')).code).toBe(2);
    expect(await databaseSnapshot(db)).toBe(before);
  });
});

describe('backpressure in the CLI', () => {
  it('exits 3 with the message the API sends with its 429, and writes nothing', async () => {
    const env = { ...process.env, DATABASE_URL: database.url, DAGENT_MAX_QUEUED: '2' };
    const limited = cliWith(env);
    expect((await limited('submit', file)).code).toBe(0); // 1 ready + 1 pending: at the limit
    const before = await databaseSnapshot(db);
    const refused = await limited('submit', file);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/^error: queue full: 2 tasks READY or PENDING \(limit 2\); nothing was submitted, retry in \d+s$/m);
    expect(await databaseSnapshot(db)).toBe(before);
    const http = await testHttp(database, { maxQueued: 2 });
    const api = await http.call('POST', '/api/dags', { raw: 'name: two\ntasks:\n  a: { type: t }\n', contentType: 'application/yaml' });
    expect(api.status).toBe(429);
    expect(refused.stderr).toContain(api.body.error.message);
  });
});
