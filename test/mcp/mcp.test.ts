import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { dagCreate, databaseReset, leaseExpire, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';

/**
 * The MCP server, driven by the official SDK's own client over both transports against a real server: a
 * scripted "model" works a DAG; a hostile session tries what it must not; a session killed mid-task loses
 * its task to the reaper, and the task runs once more.
 */
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

type Tool = (name: string, args?: Record<string, unknown>) => Promise<{ isError: boolean; value: any; text: string }>;

async function overHttp(token: string): Promise<{ client: Client; call: Tool; close: () => Promise<void> }> {
  const client = new Client({ name: 'scripted-model', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${http.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  // Closing ends the session on the server too (DELETE /mcp), as a well-behaved harness does.
  return { client, call: caller(client), close: async () => { await transport.terminateSession().catch(() => {}); await client.close(); } };
}

function caller(client: Client): Tool {
  return async (name, args = {}) => {
    const r = await client.callTool({ name, arguments: args });
    const text = (r.content as Array<{ type: string; text: string }>)[0]!.text;
    return { isError: !!r.isError, text, value: r.isError ? undefined : JSON.parse(text) };
  };
}

// The scripted model reports the model it ran on: the token grants it, and the session registers what is granted.
const agentToken = async (agentId: string, capabilities: string[] = ['research', 'write']) =>
  (await tokenCreate(db, { role: 'agent', agentId, capabilities, models: ['harness-model'] })).token;

const SCRIPTED_DAG = (name: string) => `
name: ${name}
tasks:
  research: { type: research, spec: { prompt: Find three facts, constraints: { capabilities: [research] } } }
  write: { type: write, depends_on: [research], spec: { prompt: Write them up, context: [research], constraints: { capabilities: [write] } } }
`;

/** A scripted "model": next_task → heartbeat → log → (a spawn on research) → complete, until no task is left. */
async function scriptedModel(client: Client, dagId: string, agentId: string): Promise<void> {
  const call = caller(client);
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  expect(tools).toEqual(['complete', 'fail', 'heartbeat', 'log', 'next_task', 'release', 'report_usage', 'spawn_subtasks', 'step_get', 'step_record', 'stream_write']);
  const done: string[] = [];
  for (let i = 0; i < 10; i++) {
    const next = await call('next_task', { wait_sec: 1 });
    expect(next.isError, next.text).toBe(false);
    const t = next.value.task;
    if (!t) break;
    expect(await call('heartbeat', { progress: 0.5, message: 'half way' })).toMatchObject({ isError: false });
    expect((await call('log', { lines: [{ message: `working on ${t.key}` }] })).value).toEqual({ stored: 1, dropped: 0 });
    if (t.key === 'research') {
      const spawned = await call('spawn_subtasks', { subtasks: [{ key: 'fact', type: 'research', spec: { prompt: 'one fact' } }] });
      expect(spawned.value.children).toEqual([expect.objectContaining({ key: 'fact', created: true })]);
    }
    if (t.key === 'write') expect(t.inputs).toEqual({ research: { facts: 3 } });
    const output = t.key === 'research' ? { facts: 3 } : { text: `${t.key} done` };
    const completed = await call('complete', { output, cost_usd: 0.01, model: 'harness-model' });
    expect(completed.value).toMatchObject({ completed: true });
    done.push(t.key);
  }
  expect(done.sort()).toEqual(['research', 'research/fact', 'write']);
  expect((await dagGet(db, dagId))!.status).toBe('completed');
  const attempts = await rowsOf<{ agent: string; outcome: string }>(db, sql`select agent_id as agent, outcome from attempts where dag_id = ${dagId}`);
  expect(attempts).toHaveLength(3);
  expect(attempts.every((a) => a.agent === agentId && a.outcome === 'completed')).toBe(true);
  const logs = await rowsOf<{ message: string }>(db, sql`
    select l.message from attempt_logs l join tasks t on t.id = l.task_id where t.dag_id = ${dagId} order by l.id`);
  expect(logs.map((l) => l.message).sort()).toEqual(['working on research', 'working on research/fact', 'working on write']);
}

function overStdio(token: string) {
  const transport = new StdioClientTransport({
    command: process.execPath, args: [...CLI_COMPILED, 'mcp'],
    env: { ...process.env, DATABASE_URL: database.url, DAGENT_TOKEN: token, DAGENT_LOG_LEVEL: 'warn' } as Record<string, string>, stderr: 'pipe',
  });
  return { transport, client: new Client({ name: 'stdio-model', version: '1.0.0' }) };
}

describe('an MCP-speaking agent works a DAG', () => {
  it('over streamable HTTP: next_task → heartbeat → log → complete, with a spawn, until the DAG is done', async () => {
    const dagId = await dagCreate(db, SCRIPTED_DAG('mcp-work'));
    const model = await overHttp(await agentToken('harness-1'));
    try {
      await scriptedModel(model.client, dagId, 'harness-1');
    } finally {
      await model.close();
    }
  });

  it('over stdio (dagent mcp): the same script, the same result', async () => {
    const dagId = await dagCreate(db, SCRIPTED_DAG('mcp-work-stdio'));
    const { transport, client } = overStdio(await agentToken('harness-2'));
    await client.connect(transport);
    try {
      await scriptedModel(client, dagId, 'harness-2');
    } finally {
      await client.close();
    }
  });
});

describe('a hostile MCP session', () => {
  it('cannot report on a task it does not hold, widen its capabilities, introduce code or reach files', async () => {
    await dagCreate(db, 'name: mcp-hostile\ntasks:\n  a: { type: research, spec: { constraints: { capabilities: [research] } } }\n  b: { type: research, spec: { constraints: { capabilities: [research] } } }\n');
    const honest = await overHttp(await agentToken('honest', ['research']));
    const hostile = await overHttp(await agentToken('hostile', ['research']));
    try {
      const mine = (await honest.call('next_task')).value.task;
      expect((await hostile.call('complete', { output: 'stolen' })).text).toMatch(/^INVALID_INPUT: you hold no task/);
      expect((await hostile.call('complete', { task_id: mine.id, output: 'stolen' })).text).toMatch(/^FORBIDDEN: you do not hold task/);
      expect((await hostile.call('next_task', { capabilities: ['research', 'shell'] })).text).toMatch(/^FORBIDDEN: token \S+ does not grant shell/);
      const theirs = (await hostile.call('next_task')).value.task;
      expect(theirs.id).not.toBe(mine.id);
      const code = await hostile.call('spawn_subtasks', { subtasks: [{ key: 'x', type: 'w', output: { validation: { kind: 'test', command: 'touch /tmp/pwned' } } }] });
      expect(code.text).toMatch(/^FORBIDDEN: .*an agent cannot say how its work is validated/);
      // Nothing reads files or runs commands: the tools are the nine of the agent protocol.
      expect((await hostile.client.listTools()).tools.map((t) => t.name)).not.toContain('read_file');
      // The honest one's task is still its own and completes.
      expect((await honest.call('complete', { output: { ok: true } })).value).toMatchObject({ completed: true });
      const [a] = await rowsOf<{ output: unknown; by: string }>(db, sql`select output, (select agent_id from attempts where task_id = t.id) as by from tasks t where id = ${mine.id}`);
      expect(a).toEqual({ output: { ok: true }, by: 'honest' });
    } finally {
      await honest.close();
      await hostile.close();
    }
  });

  it('a session belongs to the token that opened it; a read token\'s session has no agent tools', async () => {
    const agent = await overHttp(await agentToken('owner', ['research']));
    const sessionId = (agent.client.transport as StreamableHTTPClientTransport).sessionId!;
    const other = await agentToken('intruder', ['research']);
    const r = await fetch(`${http.url}/mcp`, {
      method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      headers: { authorization: `Bearer ${other}`, 'mcp-session-id': sessionId, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    });
    expect(r.status).toBe(404);
    expect((await fetch(`${http.url}/mcp`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(401);
    await agent.close();
    const { token: read } = await tokenCreate(db, { role: 'read', name: 'viewer' });
    const viewer = await overHttp(read);
    expect((await viewer.client.listTools().catch(() => ({ tools: [] }))).tools.map((t) => t.name)).not.toContain('next_task');
    await viewer.close();
  });
});

describe('MCP sessions are bounded', () => {
  it('a token opens at most 16 sessions at once: the next is a 503 until one is closed', async () => {
    const token = await agentToken('many', ['research']);
    const open = [];
    for (let i = 0; i < 16; i++) open.push(await overHttp(token));
    const refused = await overHttp(token).then(() => 'opened', (e: Error) => e.message);
    expect(refused).toMatch(/503|too many MCP sessions open for this token/);
    await open.pop()!.close();
    const again = await overHttp(token);
    expect((await again.client.listTools()).tools.length).toBe(11);
    for (const s of [...open, again]) await s.close();
  });
});

describe('an MCP session over stdio', () => {
  it('works a task; killed mid-task, its task is reaped and runs once more', async () => {
    const dagId = await dagCreate(db, 'name: mcp-stdio\ndefaults: { retry: { strategy: immediate } }\ntasks:\n  one: { type: research, spec: { constraints: { capabilities: [research] } } }\n  two: { type: research, spec: { constraints: { capabilities: [research] } } }\n');
    const token = await agentToken('stdio-1', ['research']);
    const { transport, client } = overStdio(token);
    await client.connect(transport);
    const call = caller(client);
    const first = (await call('next_task')).value.task;
    expect((await call('complete', { output: { by: 'stdio' } })).value).toMatchObject({ completed: true });
    const secondCall = await call('next_task');
    const second = secondCall.value?.task;
    expect(second, secondCall.text).toBeTruthy();
    expect(second.key).not.toBe(first.key);
    // The session said "received" (its first beat), then the harness dies holding the task: no more heartbeats.
    await eventually('the first heartbeat', async () => (await rowsOf(db, sql`select 1 from tasks where id = ${second.id} and heartbeat_at > claimed_at`)).length > 0);
    process.kill(transport.pid!, 'SIGKILL');
    await eventually('the stdio server exited', async () => {
      try { process.kill(transport.pid!, 0); return false; } catch { return true; }
    });
    await leaseExpire(db, second.id);
    await reaperCreate({ db }).runOnce();
    const again = await overHttp(token);
    try {
      const retaken = (await again.call('next_task')).value.task;
      expect(retaken.id).toBe(second.id);
      expect(retaken.attempt).toBe(2);
      expect((await again.call('complete', { output: { by: 'http' } })).value).toMatchObject({ completed: true });
    } finally {
      await again.close();
    }
    const attempts = await rowsOf<{ outcome: string }>(db, sql`select outcome from attempts where task_id = ${second.id} order by fence`);
    expect(attempts.map((a) => a.outcome)).toEqual(['failed', 'completed']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });
});

describe('an operator\'s MCP session', () => {
  it('an admin submits a DAG, follows it, reads its graph and task as resources, and retries a dead letter; refusals are in words', async () => {
    const { token: admin } = await tokenCreate(db, { role: 'admin', name: 'ops' });
    const ops = await overHttp(admin);
    try {
      const tools = (await ops.client.listTools()).tools.map((t) => t.name).sort();
      expect(tools).toEqual(['approve', 'dag_status', 'dlq_cancel', 'dlq_list', 'dlq_retry', 'reject', 'stream_read', 'submit_dag', 'task_show']);
      const bad = await ops.call('submit_dag', { yaml: 'name: broken\ntasks:\n  a: { type: a, depends_on: [b] }\n' });
      expect(bad.text).toBe('DAG_INVALID: request.yaml:3:30 tasks.a.depends_on[0]: unknown task "b" (did you mean "a"?)');
      expect((await ops.call('submit_dag', { file: '/etc/passwd' })).text).toMatch(/^INVALID_INPUT: file: \/etc\/passwd is outside the DAG's directory/);
      const submitted = await ops.call('submit_dag', { yaml: 'name: by-mcp\ntasks:\n  a: { type: a, max_attempts: 1 }\n  b: { type: b, depends_on: [a] }\n' });
      const dagId = submitted.value.results[0].dagId;
      const status = await ops.call('dag_status', { dag_id: dagId });
      expect(status.value).toMatchObject({ dag: { name: 'by-mcp', status: 'running' }, counts: { ready: 1, pending: 1 } });

      const worker = await overHttp(await agentToken('w', []));
      expect((await worker.call('next_task')).value.task.key).toBe('a');
      expect((await worker.call('fail', { error_class: 'crash', message: 'boom', retryable: false })).value).toMatchObject({ status: 'dead_lettered' });
      await worker.close();
      const [entry] = (await ops.call('dlq_list', { dag_id: dagId })).value.entries;
      expect(entry).toMatchObject({ taskKey: 'a', errorClass: 'crash' });
      expect((await ops.call('dlq_retry', { id: entry.id, note: 'flaky' })).isError).toBe(false);

      const graph = await ops.client.readResource({ uri: `dagent://dags/${dagId}/graph` });
      expect((graph.contents[0] as { text: string }).text).toContain('a --> b');
      const taskId = status.value.tasks.find((t: { key: string }) => t.key === 'a').id;
      const task = JSON.parse(((await ops.client.readResource({ uri: `dagent://tasks/${taskId}` })).contents[0] as { text: string }).text);
      expect(task.task.status).toBe('ready');
      expect(task.attempts[0]).toMatchObject({ errorClass: 'crash', errorMessage: 'boom' });
      expect((await ops.call('task_show', { task_id: 'tsk_nope' })).text).toBe('NOT_FOUND: task tsk_nope not found');
    } finally {
      await ops.close();
    }
  });

  it('each token has the tools its role has over HTTP: read looks, submit also submits', async () => {
    const names = async (role: 'read' | 'submit') => {
      const { token } = await tokenCreate(db, { role, name: role });
      const s = await overHttp(token);
      try { return (await s.client.listTools()).tools.map((t) => t.name).sort(); } finally { await s.close(); }
    };
    expect(await names('read')).toEqual(['dag_status', 'dlq_list', 'stream_read', 'task_show']);
    expect(await names('submit')).toEqual(['dag_status', 'dlq_list', 'stream_read', 'submit_dag', 'task_show']);
  });
});

describe('dagent mcp refuses a missing, unknown or tool-less token', () => {
  it('exit 2 without a token, 1 with an unknown one or a signal token, each with the reason', async () => {
    const { cliWith } = await import('../helpers/cli.js');
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: database.url };
    delete env.DAGENT_TOKEN;
    const cli = cliWith(env);
    const none = await cli('mcp');
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--token (or DAGENT_TOKEN) is required');
    const unknown = await cli('mcp', '--token', 'dgt_nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('the token is unknown or revoked');
    const { token: signal } = await tokenCreate(db, { role: 'signal', name: 'ci' });
    const refused = await cli('mcp', '--token', signal);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('a signal token has no MCP tools');
  });
});

describe('next_task waits as every waiting claim of the node does', () => {
  it('claims once while nothing is READY for it, then takes the task a READY hint names', async () => {
    const { engineEvents } = await import('../../src/observability/engine-events.js');
    const claims: string[] = [];
    const count = (e: { agentId: string }) => { if (e.agentId === 'waiter-1') claims.push(e.agentId); };
    engineEvents.on('claim', count);
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'waiter-1', capabilities: ['research', 'write'] });
    const s = await overHttp(token);
    try {
      // Nothing READY for 2 s: one claim statement, not one every half second.
      const idle = await s.call('next_task', { wait_sec: 2 });
      expect(idle.value.task).toBeNull();
      expect(claims).toHaveLength(1);

      const waiting = s.call('next_task', { wait_sec: 20 });
      await eventually('the second call claimed once and waits', async () => claims.length === 2);
      const dagId = await dagCreate(db, SCRIPTED_DAG('woken'));
      const got = await waiting;
      expect(got.value.task).toMatchObject({ key: 'research', dag_id: dagId });
      expect(claims.length).toBeLessThanOrEqual(4);
    } finally {
      engineEvents.off('claim', count);
      await s.close();
    }
  });

  it('twelve concurrent waits on one session: at most the per-agent cap wait, and waiting costs no claim statement', async () => {
    const { engineEvents } = await import('../../src/observability/engine-events.js');
    const { CLAIM_WAIT_DEFAULTS } = await import('../../src/config/index.js');
    const claims: string[] = [];
    const count = (e: { agentId: string }) => { if (e.agentId === 'waiter-many') claims.push(e.agentId); };
    engineEvents.on('claim', count);
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'waiter-many', capabilities: ['research', 'write'] });
    const s = await overHttp(token);
    try {
      const answered: number[] = [];
      const started = Date.now();
      const calls = Array.from({ length: 12 }, () => s.call('next_task', { wait_sec: 3 }).then((r) => { answered.push(Date.now() - started); return r; }));
      const results = await Promise.all(calls);
      expect(results.every((r) => r.value.task === null)).toBe(true);
      // One claim statement per call, none while they wait: the waits are on the node's LISTEN connection, not polls.
      expect(claims).toHaveLength(12);
      // Past the per-agent cap, a call answers with what its one claim found instead of waiting.
      const waitedFull = answered.filter((ms) => ms >= 2_500).length;
      expect(waitedFull).toBeLessThanOrEqual(CLAIM_WAIT_DEFAULTS.waitingPerAgent);
      expect(waitedFull).toBeGreaterThan(0);
    } finally {
      engineEvents.off('claim', count);
      await s.close();
    }
  });

  it('a session whose token is revoked while next_task waits claims nothing more: the call ends without a task', async () => {
    const { engineEvents } = await import('../../src/observability/engine-events.js');
    const { tokenRevoke, tokenVerify } = await import('../../src/auth/tokens.js');
    const { McpAgentSession } = await import('../../src/mcp/agent-session.js');
    const { ClaimWaiters } = await import('../../src/claim-wait/waiters.js');
    const claims: string[] = [];
    const count = (e: { agentId: string }) => { if (e.agentId === 'waiter-2') claims.push(e.agentId); };
    engineEvents.on('claim', count);
    const waiters = new ClaimWaiters({ databaseUrl: database.sessionUrl, perAgent: 4, max: 100 });
    const { token, id } = await tokenCreate(db, { role: 'agent', agentId: 'waiter-2', capabilities: ['research', 'write'] });
    const session = new McpAgentSession(db, (await tokenVerify(db, token))!, waiters);
    try {
      const waiting = session.next({ waitSec: 20 });
      await eventually('its first claim', async () => claims.length === 1);
      await tokenRevoke(db, id);
      const dagId = await dagCreate(db, SCRIPTED_DAG('after-revoke'));
      expect(await waiting).toBeNull();
      expect(claims).toHaveLength(1);
      expect((await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId} and key = 'research'`))[0]!.status).toBe('ready');
    } finally {
      engineEvents.off('claim', count);
      session.close();
      await waiters.close();
    }
  });
});
