import { createServer } from 'node:http';
import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { cliWith } from '../helpers/cli.js';
import { sseConnect, type SseEvent } from '../helpers/sse.js';
import { eventually } from '../helpers/wait.js';
import { dagSpec, databaseReset, databaseSnapshot, rowsOf } from '../helpers/factories.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { agentRegister } from '../../src/engine/ops/agents.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { taskFail } from '../../src/engine/attempt/fail.js';
import { streamWrite } from '../../src/engine/attempt/streams.js';
import { webhookAdd } from '../../src/webhooks/webhooks.js';
import { webhookDispatcherCreate } from '../../src/maintenance/webhook-dispatcher.js';

// Tenant-scoped tokens on what flows rather than what is listed: the live event stream, metrics, signals, MCP
// sessions and webhooks carry nothing of another tenant to a token (or webhook) of tenant a.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });

beforeEach(async () => {
  await databaseReset(db);
  await tenantCreate(db, { id: 'a' });
  await tenantCreate(db, { id: 'b' });
});

const MISSING = { dag: 'dag_00000000000000', task: 'tsk_00000000000000', dlq: 'dlq_00000000000000' };

async function submit(tenant: string, yaml: string): Promise<string> {
  return (await dagSubmit(db, [await dagSpec(yaml)], { tenant }))[0]!.dagId;
}

interface Worked { dagId: string; done: string; boom: string; dlq: string }

/** A DAG of tenant `t` worked to its end by its own agent: `done` completes after writing to its stream, `boom` is dead-lettered. */
async function worked(t: string): Promise<Worked> {
  const dagId = await submit(t, `name: ${t}-flow\ntasks:\n  done: { type: t, spec: { constraints: { capabilities: [${t}-job] } } }\n  boom: { type: t, max_attempts: 1, spec: { constraints: { capabilities: [${t}-job] } } }\n`);
  await agentRegister(db, { id: `${t}-worker`, type: 'test', capabilities: [`${t}-job`], maxConcurrent: 10, tenants: [t] });
  const ids: Record<string, string> = {};
  for (const h of await taskClaim(db, `${t}-worker`, { dagId, start: true, limit: 10 })) {
    ids[h.key] = h.id;
    if (h.key === 'boom') {
      await taskFail(db, { taskId: h.id, fence: h.fence, errorClass: 'crash', message: `${t} boom`, retryable: false });
    } else {
      await streamWrite(db, { taskId: h.id, fence: h.fence }, { name: 'output', fromSeq: 1, chunks: [{ kind: 'text', data: `${t} secret draft` }] });
      await taskComplete(db, { taskId: h.id, fence: h.fence, output: { text: `${t} result` } });
    }
  }
  const [dl] = await rowsOf<{ id: string }>(db, sql`select id from dead_letters where dag_id = ${dagId}`);
  return { dagId, done: ids.done!, boom: ids.boom!, dlq: dl!.id };
}

const mentions = (events: SseEvent[], ids: string[]) => events.filter((e) => ids.some((id) => e.data.includes(id)));

describe('the live event stream (GET /api/events)', () => {
  it('a reader scoped to tenant a hears a\'s DAGs and nothing of b\'s; ?dag_id= of b\'s DAG is a 404 like a DAG nobody made', async () => {
    const { token } = await tokenCreate(db, { role: 'read', tenants: ['a'] });
    const reader = await sseConnect(`${http.url}/api/events`, { token });
    const watcher = await sseConnect(`${http.url}/api/events`, { token: http.adminToken });
    try {
      expect(reader.status).toBe(200);
      // b's work first, then a's: once the reader has a's dead letter, b's events went out before it.
      const B = await worked('b');
      const A = await worked('a');
      await eventually('the unscoped watcher heard b\'s dead letter', async () => mentions(watcher.events(), [B.dagId]).some((e) => e.event === 'task.dead_lettered'));
      await eventually('the scoped reader heard a\'s dead letter', async () => mentions(reader.events(), [A.dagId]).some((e) => e.event === 'task.dead_lettered'));
      expect(mentions(reader.events(), [B.dagId, B.done, B.boom, B.dlq])).toEqual([]);
      expect(JSON.stringify(reader.events())).not.toContain('b secret');
      expect(reader.ended()).toBe(false);

      const none = await sseConnect(`${http.url}/api/events?dag_id=${MISSING.dag}`, { token });
      expect(none.status).toBe(404);
      const noneBody = JSON.stringify(await none.json()).replaceAll(MISSING.dag, 'ID');
      const theirs = await sseConnect(`${http.url}/api/events?dag_id=${B.dagId}`, { token });
      if (theirs.status !== 404) await theirs.close();
      expect(theirs.status).toBe(404);
      expect(JSON.stringify(await theirs.json()).replaceAll(B.dagId, 'ID')).toBe(noneBody);
    } finally {
      await reader.close();
      await watcher.close();
    }
  });
});

describe('metrics (GET /metrics)', () => {
  it('a token scoped to tenant a gets a\'s series: no line of tenant b, of b\'s DAGs, nor the all-tenant task counts', async () => {
    await submit('a', 'name: a-open\ntasks:\n  x: { type: t, spec: { constraints: { capabilities: [nobody] } } }\n');
    const B = await submit('b', 'name: b-open\ntasks:\n  x: { type: t, spec: { constraints: { capabilities: [nobody] } } }\n');
    // Unscoped, both tenants are there (what the scoped answer must leave out).
    const all = (await http.call('GET', '/metrics')).body as string;
    expect(all).toContain('tenant="b"');
    expect(all).toContain(B);
    expect(all).toMatch(/^dagent_tasks\{/m);

    const { token } = await tokenCreate(db, { role: 'read', tenants: ['a'] });
    const r = await http.call('GET', '/metrics', { token });
    expect(r.status).toBe(200);
    const text = r.body as string;
    expect(text).toMatch(/^dagent_tenant_tasks\{tenant="a",state="ready"\} 1$/m);
    expect(text.split('\n').filter((l) => l.includes('tenant="b"') || l.includes(B))).toEqual([]);
    expect(text.split('\n').filter((l) => /^dagent_tasks[{ ]/.test(l))).toEqual([]);
    expect(text).not.toContain('tenant="default"');
  });
});

describe('signals (POST /api/signals/:key)', () => {
  it('a signal token scoped to a completes a\'s task waiting on the key, not b\'s waiting on the same key; b\'s token then completes b\'s', async () => {
    const gate = (t: string) => submit(t, `name: ${t}-gate\ntasks:\n  gate: { type: gate, wait_for: { signal: "deploy:prod" } }\n`);
    const [A, B] = [await gate('a'), await gate('b')];
    const gateOf = async (dagId: string) => (await rowsOf<{ id: string; status: string; output: unknown }>(db, sql`select id, status, output from tasks where dag_id = ${dagId}`))[0]!;
    expect([(await gateOf(A)).status, (await gateOf(B)).status]).toEqual(['waiting', 'waiting']);

    const { token: signalA } = await tokenCreate(db, { role: 'signal', name: 'ci-a', tenants: ['a'] });
    const sent = await http.call('POST', '/api/signals/deploy:prod', { token: signalA, body: { payload: { from: 'a' } } });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect(sent.body.completed.map((t: { dagId: string }) => t.dagId)).toEqual([A]);
    expect(await gateOf(A)).toMatchObject({ status: 'completed', output: { from: 'a' } });
    expect((await gateOf(B)).status).toBe('waiting');

    const { token: signalB } = await tokenCreate(db, { role: 'signal', name: 'ci-b', tenants: ['b'] });
    const second = await http.call('POST', '/api/signals/deploy:prod', { token: signalB, body: { payload: { from: 'b' } } });
    expect(second.body.completed.map((t: { dagId: string }) => t.dagId)).toEqual([B]);
    expect(await gateOf(B)).toMatchObject({ status: 'completed', output: { from: 'b' } });
    expect((await gateOf(A)).output).toEqual({ from: 'a' });
  });
});

type Tool = (name: string, args?: Record<string, unknown>) => Promise<{ isError: boolean; text: string; value: any }>;

async function overHttp(token: string): Promise<{ client: Client; call: Tool; read: (uri: string) => Promise<string>; close: () => Promise<void> }> {
  const client = new Client({ name: 'tenant-probe', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${http.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  const call: Tool = async (name, args = {}) => {
    const r = await client.callTool({ name, arguments: args });
    const text = (r.content as Array<{ type: string; text: string }>)[0]!.text;
    return { isError: !!r.isError, text, value: r.isError ? undefined : JSON.parse(text) };
  };
  // A resource's text, or the error it was refused with.
  const read = (uri: string) => client.readResource({ uri }).then((r) => `read: ${(r.contents[0] as { text: string }).text}`, (e: Error) => `refused: ${e.message}`);
  return { client, call, read, close: async () => { await transport.terminateSession().catch(() => {}); await client.close(); } };
}

describe('MCP sessions of a token scoped to tenant a', () => {
  it('see b\'s DAGs, tasks and streams as ids nobody made (NOT_FOUND), never their data; dlq_list lists a\'s only; dlq_retry cannot reach b\'s', async () => {
    const A = await worked('a');
    const B = await worked('b');
    const { token: read } = await tokenCreate(db, { role: 'read', tenants: ['a'] });
    const viewer = await overHttp(read);
    try {
      expect((await viewer.call('dag_status', { dag_id: A.dagId })).isError).toBe(false);
      for (const [tool, field, foreign, missing] of [
        ['dag_status', 'dag_id', B.dagId, MISSING.dag], ['task_show', 'task_id', B.done, MISSING.task], ['stream_read', 'task_id', B.done, MISSING.task],
      ] as const) {
        const none = await viewer.call(tool, { [field]: missing });
        expect(none.text, tool).toMatch(/^NOT_FOUND: /);
        const theirs = await viewer.call(tool, { [field]: foreign });
        expect.soft(theirs.isError, `${tool} of b's ${foreign}: ${theirs.text.slice(0, 200)}`).toBe(true);
        expect.soft(theirs.text.replaceAll(foreign, 'ID'), tool).toBe(none.text.replaceAll(missing, 'ID'));
      }
      for (const [uri, foreign, missing] of [
        ['dagent://dags/ID', B.dagId, MISSING.dag], ['dagent://tasks/ID', B.done, MISSING.task], ['dagent://tasks/ID/streams/output', B.done, MISSING.task],
      ] as const) {
        const none = await viewer.read(uri.replace('ID', missing));
        expect(none, uri).toMatch(/^refused: .*not found/);
        const theirs = await viewer.read(uri.replace('ID', foreign));
        expect.soft(theirs.replaceAll(foreign, 'ID'), uri).toBe(none.replaceAll(missing, 'ID'));
        expect.soft(theirs).not.toMatch(/b-flow|b secret|b result|b boom/);
      }
      expect((await viewer.call('dlq_list')).value.entries.map((e: { id: string }) => e.id)).toEqual([A.dlq]);
      expect((await viewer.call('dlq_list', { dag_id: B.dagId })).value?.entries ?? []).toEqual([]);
    } finally {
      await viewer.close();
    }

    const { token: admin } = await tokenCreate(db, { role: 'admin', tenants: ['a'] });
    const ops = await overHttp(admin);
    try {
      const before = await databaseSnapshot(db);
      const none = await ops.call('dlq_retry', { id: MISSING.dlq });
      expect(none.text).toMatch(/^NOT_FOUND: /);
      const theirs = await ops.call('dlq_retry', { id: B.dlq });
      expect(theirs.text.replaceAll(B.dlq, 'ID')).toBe(none.text.replaceAll(MISSING.dlq, 'ID'));
      expect(await databaseSnapshot(db)).toBe(before);
      expect((await ops.call('dlq_retry', { id: A.dlq })).isError).toBe(false);
    } finally {
      await ops.close();
    }
  });
});

/** A receiver on loopback that keeps what each path was sent. */
async function receiver() {
  const got: Record<string, Array<{ type: string; dag_id: string }>> = {};
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => { (got[req.url!] ??= []).push(JSON.parse(body)); res.writeHead(200).end(); });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    got: (path: string) => got[path] ?? [],
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

describe('webhooks of a tenant', () => {
  it('a webhook of tenant a gets the events of a\'s DAGs only; one without a tenant gets both; the CLI adds one with --tenant', async () => {
    const hooks = await receiver();
    try {
      const allowHosts = ['127.0.0.1'];
      await webhookAdd(db, { url: `${hooks.url}/a`, events: ['dag.completed'], tenant: 'a', allowHosts });
      await webhookAdd(db, { url: `${hooks.url}/all`, events: ['dag.completed'], allowHosts });
      const finish = async (t: string) => {
        const dagId = await submit(t, `name: ${t}-hooked\ntasks:\n  only: { type: t, spec: { constraints: { capabilities: [${t}-hook] } } }\n`);
        await agentRegister(db, { id: `${t}-hooker`, type: 'test', capabilities: [`${t}-hook`], maxConcurrent: 10, tenants: [t] });
        const [h] = await taskClaim(db, `${t}-hooker`, { dagId, start: true });
        await taskComplete(db, { taskId: h!.id, fence: h!.fence, output: { ok: true } });
        return dagId;
      };
      const B = await finish('b');
      const A = await finish('a');
      const dispatcher = webhookDispatcherCreate({ db, allowHosts, maxAttempts: 1 });
      await eventually('every delivery made', async () => {
        await dispatcher.runOnce();
        return (await rowsOf(db, sql`select 1 from webhook_deliveries where status = 'pending'`)).length === 0;
      });
      expect(hooks.got('/a').map((e) => [e.type, e.dag_id])).toEqual([['dag.completed', A]]);
      expect(hooks.got('/all').map((e) => e.dag_id).sort()).toEqual([A, B].sort());
    } finally {
      await hooks.close();
    }

    const added = await cli('webhooks', 'add', 'https://hooks.example.com/team-a', '--tenant', 'a');
    expect([added.code, added.stderr]).toEqual([0, '']);
    expect(await rowsOf(db, sql`select tenant_id from webhooks where url = 'https://hooks.example.com/team-a'`)).toEqual([{ tenant_id: 'a' }]);
    const unknown = await cli('webhooks', 'add', 'https://hooks.example.com/ghost', '--tenant', 'ghost');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('ghost');
    expect(await rowsOf(db, sql`select 1 from webhooks where url = 'https://hooks.example.com/ghost'`)).toEqual([]);
  });
});
