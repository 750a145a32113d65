import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { tokenCreate } from '../../src/auth/tokens.js';
import { cliWith } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { agentCreate, dagCreate, databaseReset, databaseSnapshot, drain, rowsOf, taskStatusByKey } from '../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

const yaml = `
name: deploy
tasks:
  build: { type: w }
  approved: { type: gate, depends_on: [build], wait_for: { signal: "deploy:prod", timeout: 1h } }
`;

/** A DAG whose gate is WAITING on deploy:prod. */
async function waitingGate(): Promise<string> {
  const dagId = await dagCreate(db, yaml);
  await agentCreate(db, 'w');
  await drain(db, 'w');
  expect((await taskStatusByKey(db, dagId)).approved).toBe('waiting');
  return dagId;
}

describe('POST /api/signals/:key', () => {
  it('a signal token completes the waiting task with the payload, and may call nothing else', async () => {
    const dagId = await waitingGate();
    const { token } = await tokenCreate(db, { role: 'signal', name: 'ci' });
    const r = await http.call('POST', '/api/signals/deploy:prod', { token, body: { payload: { pipeline: 812, passed: true } } });
    expect(r.status).toBe(200);
    expect(r.body.completed.map((t: { key: string }) => t.key)).toEqual(['approved']);
    expect((await dagStatusOf(dagId))).toBe('completed');
    const [out] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where dag_id = ${dagId} and key = 'approved'`);
    expect(out!.output).toEqual({ pipeline: 812, passed: true });
    const [event] = await rowsOf<{ data: { by: string } }>(db, sql`select data from events where type = 'task.signalled'`);
    expect(event!.data.by).toMatch(/^signal:tok_/);

    for (const [method, path] of [['GET', '/api/dags'], ['POST', '/api/dags'], ['GET', '/api/dlq']] as const) {
      expect((await http.call(method, path, { token, body: method === 'POST' ? { yaml } : undefined })).status).toBe(403);
    }
  });

  it('an agent or read token is refused with 403, a bad key or payload with 400, and nothing changes', async () => {
    const dagId = await waitingGate();
    const agent = await http.agentToken('w');
    const { token: read } = await tokenCreate(db, { role: 'read', name: 'viewer' });
    const before = await databaseSnapshot(db);
    expect((await http.call('POST', '/api/signals/deploy:prod', { token: agent, body: { payload: 1 } })).status).toBe(403);
    expect((await http.call('POST', '/api/signals/deploy:prod', { token: read, body: { payload: 1 } })).status).toBe(403);
    expect((await http.call('POST', '/api/signals/deploy:prod', { token: null, body: { payload: 1 } })).status).toBe(401);
    const badKey = await http.call('POST', `/api/signals/${encodeURIComponent('deploy prod!')}`, { body: {} });
    expect([badKey.status, badKey.body.error.message]).toEqual([400, expect.stringMatching(/signal key "deploy prod!"/)]);
    const badField = await http.call('POST', '/api/signals/deploy:prod', { body: { payload: 1, approve: true } });
    expect([badField.status, badField.body.error.message]).toEqual([400, expect.stringMatching(/^body/)]);
    const nul = await http.call('POST', '/api/signals/deploy:prod', { body: { payload: 'a\u0000b' } });
    expect(nul.status).toBe(400);
    // The waiting task is nobody's: an agent that learns its fence still cannot complete, fail or heartbeat it.
    const [gate] = await rowsOf<{ id: string; fence: number }>(db, sql`select id, fence from tasks where dag_id = ${dagId} and key = 'approved'`);
    for (const [action, extra] of [['complete', { output: { approved: true } }], ['fail', { error_class: 'timeout', message: 'x' }], ['heartbeat', {}]] as const) {
      const r = await http.call('POST', `/api/tasks/${gate!.id}/${action}`, { token: agent, body: { fence: gate!.fence, ...extra } });
      expect(r.status, `${action}: ${JSON.stringify(r.body)}`).toBe(403);
    }
    expect(await databaseSnapshot(db)).toBe(before);
    expect((await taskStatusByKey(db, dagId)).approved).toBe('waiting');
  });
});

describe('dagent signal', () => {
  it('sends the payload and names the tasks it completed; a payload that is not JSON is exit 2 naming the option, and nothing changes', async () => {
    const dagId = await waitingGate();
    const before = await databaseSnapshot(db);
    const bad = await cli('signal', 'deploy:prod', '--payload', '{passed: true}');
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('--payload: not JSON')]);
    const badKey = await cli('signal', 'deploy/prod');
    expect([badKey.code, badKey.stderr]).toEqual([2, expect.stringContaining('signal key "deploy/prod"')]);
    const missing = await cli('signal', 'deploy:prod', '--payload-file', '/nonexistent/payload.json');
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringContaining('--payload-file /nonexistent/payload.json: cannot read it (ENOENT)')]);
    expect(await databaseSnapshot(db)).toBe(before);

    const ok = await cli('signal', 'deploy:prod', '--payload', '{"passed": true}', '--json');
    expect(ok.code).toBe(0);
    expect(ok.json().completed.map((t: { key: string }) => t.key)).toEqual(['approved']);
    expect(await dagStatusOf(dagId)).toBe('completed');
    const again = await cli('signal', 'deploy:prod');
    expect([again.code, again.stdout]).toEqual([0, expect.stringContaining('no task waits on it now')]);
  });
});

async function dagStatusOf(dagId: string): Promise<string> {
  const [d] = await rowsOf<{ status: string }>(db, sql`select status from dags where id = ${dagId}`);
  return d!.status;
}
