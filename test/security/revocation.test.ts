import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { serverStart } from './helpers/server.js';
import { innocentBystander } from './helpers/innocent.js';
import { eventStream } from './helpers/event-stream.js';

/**
 * Revoking a token ends what it has open on a running server within 2 s, pushed from the revocation's commit:
 * an MCP session stops heartbeating and hands its tasks back, a next_task that waits returns nothing (and claims
 * none of the work submitted after), the session's stream closes; an event stream delivers nothing committed after.
 */
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);
/** The promise of docs/security.md: a revoked token's sessions and streams end within this. */
const REVOCATION_BOUND_MS = 2_000;

/** `dagent tokens revoke ID`, as the operator runs it, in a process of its own. */
async function revokeByCli(id: string): Promise<void> {
  const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'tokens', 'revoke', id], {
    env: { ...process.env, DATABASE_URL: database.url, DAGENT_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'],
  }));
  let out = '';
  child.stdout.on('data', (b) => (out += b));
  child.stderr.on('data', (b) => (out += b));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  expect(code, out).toBe(0);
}

/** An MCP session over HTTP with the SDK's client, which also tells when the session's GET stream ended. */
async function mcpSession(token: string) {
  let streamEnded = false;
  let streamOpened = false;
  const watchingFetch = async (url: string | URL, init?: RequestInit) => {
    const res = await fetch(url, init);
    if (init?.method !== 'GET' || !res.ok || !res.body) return res;
    streamOpened = true;
    const [forClient, forTest] = res.body.tee();
    void (async () => {
      const reader = forTest.getReader();
      for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) break;
      streamEnded = true;
    })();
    return new Response(forClient, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  const client = new Client({ name: 'revoked-harness', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } }, fetch: watchingFetch,
    reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
  });
  await client.connect(transport);
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const r = await client.callTool({ name, arguments: args });
    const text = (r.content as Array<{ type: string; text: string }>)[0]!.text;
    return { isError: !!r.isError, text, value: r.isError ? undefined : JSON.parse(text) };
  };
  await eventually('the session\'s GET stream is open', async () => streamOpened);
  return { call, streamEnded: () => streamEnded, close: () => client.close().catch(() => {}) };
}

const PROBES = (name: string, keys: string[], capability = 'probe') =>
  `name: ${name}\ntasks:\n${keys.map((k) => `  ${k}: { type: probe, spec: { constraints: { capabilities: [${capability}] } } }`).join('\n')}\n`;

describe('revoking a token', () => {
  it('ends its MCP session at once: its task is back in the queue with no attempt spent, a waiting next_task returns nothing, its stream closes', async () => {
    const bystander = await innocentBystander(server, database, 'revocation-bystander');
    const dagId = await server.submit(PROBES('held-by-revoked', ['a', 'b']));
    const { id, token } = await tokenCreate(db, { role: 'agent', agentId: 'revoked-mcp', capabilities: ['probe'] });
    const session = await mcpSession(token);
    try {
      // The session's agent holds one task at a time (the registration's default): it holds one; the other waits.
      const heldKey: string = (await session.call('next_task')).value.task.key;
      expect(['a', 'b']).toContain(heldKey);
      const waiting = session.call('next_task', { wait_sec: 25 });
      await revokeByCli(id);
      const revokedAt = Date.now();
      // Work submitted after the revocation: the waiting call must not take it.
      const afterDagId = await server.submit(PROBES('after-revocation', ['late']));

      const answer = await waiting;
      expect(Date.now() - revokedAt).toBeLessThan(REVOCATION_BOUND_MS);
      expect(answer.isError ? answer.text : answer.value.task).toBeFalsy();
      await eventually('the held task is back in the queue', async () => {
        const rows = await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId} and key = ${heldKey}`);
        return rows[0]!.status === 'ready';
      }, REVOCATION_BOUND_MS);
      await eventually('the session\'s stream closed', async () => session.streamEnded(), REVOCATION_BOUND_MS);

      // Released, not failed: no attempt is spent, the leases are gone, nothing heartbeats them any more.
      const tasks = await rowsOf<{ key: string; status: string; attempts: number; lease_expires_at: string | null }>(db, sql`
        select key, status, attempts, lease_expires_at from tasks where dag_id = ${dagId} order by key`);
      expect(tasks).toEqual([
        { key: 'a', status: 'ready', attempts: 0, lease_expires_at: null },
        { key: 'b', status: 'ready', attempts: 0, lease_expires_at: null },
      ]);
      const outcomes = await rowsOf<{ outcome: string }>(db, sql`select outcome from attempts where dag_id = ${dagId}`);
      expect(outcomes.map((o) => o.outcome)).toEqual(['released']);
      const late = await rowsOf<{ status: string; claimed_by: string | null }>(db, sql`select status, claimed_by from tasks where dag_id = ${afterDagId}`);
      expect(late).toEqual([{ status: 'ready', claimed_by: null }]);
      // The session is gone: a call on it is refused, and nothing more is claimed for the token.
      await expect(session.call('next_task')).rejects.toThrow();
      await bystander.finish();
    } finally {
      await session.close();
    }
  });

  it('ends a `dagent mcp` (stdio) session: the process hands its task back and exits', async () => {
    const dagId = await server.submit(PROBES('held-over-stdio', ['s'], 'stdio-probe'));
    const { id, token } = await tokenCreate(db, { role: 'agent', agentId: 'revoked-stdio', capabilities: ['stdio-probe'] });
    const transport = new StdioClientTransport({
      command: process.execPath, args: [...CLI_COMPILED, 'mcp'],
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_TOKEN: token, DAGENT_LOG_LEVEL: 'warn' } as Record<string, string>, stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (b) => (stderr += b));
    const client = new Client({ name: 'stdio-harness', version: '1.0.0' });
    let closed = false;
    await client.connect(transport);
    transport.onclose = () => { closed = true; };
    try {
      const r = await client.callTool({ name: 'next_task', arguments: {} });
      expect(JSON.parse((r.content as Array<{ text: string }>)[0]!.text).task.key).toBe('s');
      await revokeByCli(id);
      await eventually('the MCP process exited', async () => closed, REVOCATION_BOUND_MS);
      expect(stderr).toContain('was revoked: the MCP session ended');
      const [task] = await rowsOf<{ status: string; attempts: number }>(db, sql`select status, attempts from tasks where dag_id = ${dagId}`);
      expect(task).toEqual({ status: 'ready', attempts: 0 });
    } finally {
      await client.close().catch(() => {});
    }
  });

  it('ends an open event stream before any event committed after the revocation', async () => {
    const { id, token } = await tokenCreate(db, { role: 'read' });
    const st = await eventStream(server, token);
    expect(st.status).toBe(200);
    const before = await server.submit(PROBES('before-revocation', ['x']));
    await eventually('the stream hears of a DAG submitted before the revocation', async () => st.text().includes(before));
    await revokeByCli(id);
    const revokedAt = Date.now();
    // Submitted after the revocation committed: none of its events may reach the revoked reader.
    const after = await server.submit(PROBES('after-revocation-events', ['y']));
    await eventually('the stream closed', async () => st.ended(), REVOCATION_BOUND_MS);
    expect(Date.now() - revokedAt).toBeLessThan(REVOCATION_BOUND_MS);
    expect(st.text()).toMatch(/event: close\ndata: \{"reason":"token revoked"\}/);
    expect(st.text()).not.toContain(after);
    await st.close();
  });
});
