import { beforeEach, describe, expect, it, vi } from 'vitest';
import { sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// A small per-attempt stream limit, to see a stream truncated without writing 8 MiB: set before any module reads
// the limits (the server runs in this process).
vi.hoisted(() => { process.env.DAGENT_LIMIT_STREAM_BYTES_PER_ATTEMPT = '400000'; });

const { tokenCreate, tokenVerify } = await import('../../src/auth/tokens.js');
const { testDatabase } = await import('../helpers/db.js');
const { testHttp } = await import('../helpers/http.js');
const { dagCreate, databaseReset, leaseExpire, rowsOf } = await import('../helpers/factories.js');
const { eventually } = await import('../helpers/wait.js');
const { sseConnect } = await import('../helpers/sse.js');
const { McpAgentSession } = await import('../../src/mcp/agent-session.js');
const { ClaimWaiters } = await import('../../src/claim-wait/waiters.js');
const { STREAM_DEFAULTS } = await import('../../src/config/index.js');

/**
 * Streams over MCP: an agent's session appends with stream_write (the session keeps the fence and numbers the
 * batches), and a reader's session reads what was written as the resource dagent://tasks/{id}/streams/{name} or
 * with stream_read, from a position; the same stream people follow live over HTTP.
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
  const call: Tool = async (name, args = {}) => {
    const r = await client.callTool({ name, arguments: args });
    const text = (r.content as Array<{ type: string; text: string }>)[0]!.text;
    return { isError: !!r.isError, text, value: r.isError ? undefined : JSON.parse(text) };
  };
  return { client, call, close: async () => { await transport.terminateSession().catch(() => {}); await client.close(); } };
}

const agentToken = async (agentId: string) => (await tokenCreate(db, { role: 'agent', agentId, capabilities: ['gen'] })).token;
const readToken = async () => (await tokenCreate(db, { role: 'read', name: 'viewer' })).token;
const DAG = 'name: gen\ndefaults: { max_attempts: 2, retry: { strategy: immediate } }\ntasks:\n  t: { type: gen, spec: { constraints: { capabilities: [gen] } } }\n';
const chunkRows = () => rowsOf<{ name: string; seq: number; kind: string; data: string }>(db, sql`
  select name, seq, kind, data from task_stream_chunks order by name, seq`);
const readResource = async (client: Client, uri: string) => JSON.parse(((await client.readResource({ uri })).contents[0] as { text: string }).text);

describe('stream_write (an agent\'s session)', () => {
  it('appends text and JSON in call order, which a reader follows live and reads as a resource and with stream_read, from a position', async () => {
    await dagCreate(db, DAG);
    const agent = await overHttp(await agentToken('writer'));
    const viewer = await overHttp(await readToken());
    try {
      const task = (await agent.call('next_task')).value.task;
      const live = await sseConnect(`${http.url}/api/tasks/${task.id}/streams/output`, { token: (await readToken()) });
      await eventually('the reader follows', async () => live.events().some((e) => e.event === 'stream'));
      expect((await agent.call('stream_write', { text: 'Draft: ' })).value).toEqual({ applied: true, chunks: 1, ended: null, next: 'Carry on.' });
      expect((await agent.call('stream_write', { task_id: task.id, json: { step: 1, of: 2 } })).value).toMatchObject({ applied: true, chunks: 2 });
      // A text over one chunk's 64 KiB is written as several, never splitting a character.
      const long = `${'ü'.repeat(40000)}🙂`;
      expect((await agent.call('stream_write', { text: long })).value).toMatchObject({ applied: true, chunks: 4 });
      expect((await agent.call('stream_write', { name: 'notes', text: 'aside' })).value).toMatchObject({ applied: true, chunks: 1 });
      expect((await agent.call('stream_write', { json: null, end: true })).value).toEqual({
        applied: true, chunks: 5, ended: 'ended', next: 'This stream has ended. Carry on with the task.',
      });
      expect((await agent.call('stream_write', { text: 'late' })).value).toMatchObject({ applied: false, chunks: 5, ended: 'ended' });

      await live.done();
      const seen = live.events().filter((e) => e.event === 'chunk').map((e) => JSON.parse(e.data) as { seq: number; text?: string; json?: unknown });
      const expectedText = `Draft: ${long}`;
      expect(seen.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5]);
      expect(seen.filter((c) => c.text !== undefined).map((c) => c.text).join('')).toBe(expectedText);
      expect(seen.filter((c) => c.text === undefined).map((c) => c.json)).toEqual([{ step: 1, of: 2 }, null]);
      const rows = await chunkRows();
      expect(rows.filter((r) => r.name === 'output' && r.kind === 'text').map((r) => Buffer.byteLength(r.data))).toEqual([7, 65536, 80004 - 65536]);

      const whole = await readResource(viewer.client, `dagent://tasks/${task.id}/streams/output`);
      expect(whole).toEqual({
        task_id: task.id, name: 'output', attempt: 1, from: 0, to: 5, text: expectedText,
        json: [{ seq: 2, json: { step: 1, of: 2 } }, { seq: 5, json: null }], more: false, end: { reason: 'ended', outcome: null },
      });
      expect(await readResource(viewer.client, `dagent://tasks/${task.id}/streams/output?from=3`)).toMatchObject({ from: 3, to: 5, text: rows.find((r) => r.name === 'output' && r.seq === 4)!.data, json: [{ seq: 5, json: null }] });
      // The notes stream, not ended by its writer, ends with its attempt.
      expect((await viewer.call('stream_read', { task_id: task.id, name: 'notes' })).value).toMatchObject({ text: 'aside', to: 1, more: false, end: null });
      expect((await agent.call('complete', { output: { done: true } })).value).toMatchObject({ completed: true });
      expect((await viewer.call('stream_read', { task_id: task.id, name: 'notes', from: 1 })).value).toMatchObject({
        text: '', from: 1, to: 1, end: { reason: 'attempt_ended', outcome: 'completed' },
      });
    } finally {
      await agent.close();
      await viewer.close();
    }
  });

  it('seq makes a repeated call write nothing; without it each call appends; a seq past the end is refused', async () => {
    await dagCreate(db, DAG);
    const agent = await overHttp(await agentToken('careful'));
    try {
      await agent.call('next_task');
      expect((await agent.call('stream_write', { text: 'a', seq: 1 })).value).toMatchObject({ applied: true, chunks: 1 });
      // The same call again (its answer was lost, the model called again): nothing written twice.
      expect((await agent.call('stream_write', { text: 'a', seq: 1 })).value).toEqual({
        applied: false, chunks: 1, ended: null, next: 'Written before: nothing written again. The next write\'s seq is 2.',
      });
      expect((await agent.call('stream_write', { text: 'b' })).value).toMatchObject({ applied: true, chunks: 2 });
      expect((await agent.call('stream_write', { text: 'b' })).value).toMatchObject({ applied: true, chunks: 3 });
      expect((await agent.call('stream_write', { text: 'c', seq: 9 })).text).toBe('INVALID_INPUT: seq 9: stream output has 3 chunks; the next write starts at 4');
      expect((await chunkRows()).map((r) => r.data)).toEqual(['a', 'b', 'b']);
    } finally {
      await agent.close();
    }
  });

  it('bad input is a clear error that writes nothing; a read token has no stream_write, an agent token no stream_read', async () => {
    await dagCreate(db, DAG);
    const agent = await overHttp(await agentToken('careless'));
    const viewer = await overHttp(await readToken());
    try {
      expect((await agent.call('stream_write', { text: 'x' })).text).toBe('INVALID_INPUT: you hold no task: call next_task first');
      await agent.call('next_task');
      expect((await agent.call('stream_write', { text: 'x', json: 1 })).text).toBe('INVALID_INPUT: give text or json, not both (two calls write both, in order)');
      expect((await agent.call('stream_write', {})).text).toBe('INVALID_INPUT: give text, json, or end: true');
      expect((await agent.call('stream_write', { json: { big: 'x'.repeat(70000) } })).text).toBe('INVALID_INPUT: json: 70010 bytes; a JSON item holds at most 65536');
      expect((await agent.call('stream_write', { name: 'Bad Name', text: 'x' })).text).toMatch(/Invalid arguments for tool stream_write.*lowercase letters, digits/s);
      expect((await viewer.call('stream_write', { text: 'x' })).text).toMatch(/Tool stream_write not found/);
      expect((await agent.call('stream_read', { task_id: 'tsk_x' })).text).toMatch(/Tool stream_read not found/);
      expect(await chunkRows()).toEqual([]);

      const [t] = await rowsOf<{ id: string }>(db, sql`select id from tasks`);
      expect((await viewer.call('stream_read', { task_id: t!.id })).value).toMatchObject({ text: '', to: 0, more: false, end: null });
      expect((await viewer.call('stream_read', { task_id: 'tsk_nosuchtask000' })).text).toBe('NOT_FOUND: task tsk_nosuchtask000 not found');
      expect((await viewer.call('stream_read', { task_id: t!.id, attempt: 7 })).text).toMatch(/^NOT_FOUND: stream .*of attempt 7/);
      await expect(viewer.client.readResource({ uri: `dagent://tasks/${t!.id}/streams/output?from=-1` })).rejects.toThrow(/from "-1": expected a whole number from 0/);
    } finally {
      await agent.close();
      await viewer.close();
    }
  });

  it('past the attempt\'s stream bytes the write says truncated and what to do; the task goes on', async () => {
    await dagCreate(db, DAG);
    const agent = await overHttp(await agentToken('verbose'));
    try {
      await agent.call('next_task');
      const piece = 'y'.repeat(150_000);
      expect((await agent.call('stream_write', { text: piece })).value).toMatchObject({ applied: true, ended: null });
      expect((await agent.call('stream_write', { text: piece })).value).toMatchObject({ applied: true, ended: null });
      const full = (await agent.call('stream_write', { text: piece })).value;
      expect(full).toMatchObject({ applied: false, ended: 'truncated', next: expect.stringMatching(/^The task's streams are full/) });
      expect((await agent.call('complete', { output: 1 })).value).toMatchObject({ completed: true });
    } finally {
      await agent.close();
    }
  });

  it('a session that no longer holds its task is refused LEASE_LOST and writes nothing', async () => {
    await dagCreate(db, DAG);
    const agent = await overHttp(await agentToken('lapsed'));
    try {
      const task = (await agent.call('next_task')).value.task;
      await agent.call('stream_write', { text: 'before' });
      await eventually('the session\'s first heartbeat', async () =>
        (await rowsOf(db, sql`select 1 from tasks where id = ${task.id} and heartbeat_at > claimed_at`)).length > 0);
      await leaseExpire(db, task.id);
      expect((await agent.call('stream_write', { text: 'after' })).text).toMatch(new RegExp(`^LEASE_LOST: .*task ${task.id}.*Stop working on it`, 's'));
      expect((await chunkRows()).map((r) => r.data)).toEqual(['before']);
    } finally {
      await agent.close();
    }
  });
});

describe('a stream write whose database answer is lost', () => {
  /** The database, except that the next stream write is run and its answer replaced by `error`. */
  function lossy(error: () => Error) {
    const dialect = new PgDialect();
    let lose = false;
    const wrapped = new Proxy(db, {
      get(target, key, receiver) {
        if (key !== 'execute') return Reflect.get(target, key, receiver);
        return async (query: SQL) => {
          const result = await target.execute(query);
          if (lose && dialect.sqlToQuery(query).sql.includes('insert into task_streams')) {
            lose = false;
            throw error();
          }
          return result;
        };
      },
    });
    return { db: wrapped, loseNext: () => { lose = true; } };
  }

  async function session(agentId: string, d: typeof db) {
    const waiters = new ClaimWaiters({ databaseUrl: database.sessionUrl, perAgent: 4, max: 100 });
    const s = new McpAgentSession(d, (await tokenVerify(db, await agentToken(agentId)))!, waiters);
    return { s, close: async () => { await s.close(); await waiters.close(); } };
  }
  const text = (data: string) => ({ name: 'output', chunks: [{ kind: 'text' as const, data }], end: false });

  it('the connection lost: the session sends the same batch again at once, written once', async () => {
    await dagCreate(db, DAG);
    const d = lossy(() => new Error('Connection terminated unexpectedly'));
    const { s, close } = await session('retrier', d.db);
    try {
      expect(await s.next({})).not.toBeNull();
      d.loseNext();
      // The first try was written; its answer lost, the same batch again writes nothing and answers where the stream is.
      expect(await s.streamWrite(undefined, text('Hello, '))).toEqual({ applied: false, chunks: 1, ended: null });
      expect(await s.streamWrite(undefined, text('world'))).toEqual({ applied: true, chunks: 2, ended: null });
      expect((await chunkRows()).map((r) => [r.seq, r.data])).toEqual([[1, 'Hello, '], [2, 'world']]);
    } finally {
      await close();
    }
  });

  it('any other error: the call fails, and the session sends that batch first with its next write, so it is written once and in order', async () => {
    await dagCreate(db, DAG);
    const d = lossy(() => new Error('the answer was lost on its way'));
    const { s, close } = await session('keeper', d.db);
    try {
      expect(await s.next({})).not.toBeNull();
      d.loseNext();
      await expect(s.streamWrite(undefined, text('one '))).rejects.toThrow(/the answer was lost/);
      expect(await s.streamWrite(undefined, text('two'))).toEqual({ applied: true, chunks: 2, ended: null });
      expect((await chunkRows()).map((r) => [r.seq, r.data])).toEqual([[1, 'one '], [2, 'two']]);
    } finally {
      await close();
    }
  });
});

describe('a long stream read in pages', () => {
  it(`stream_read answers up to ${STREAM_DEFAULTS.readBytes} bytes, more: true, and the next read goes on from to`, async () => {
    await dagCreate(db, DAG);
    const agent = await overHttp(await agentToken('long'));
    const viewer = await overHttp(await readToken());
    try {
      const task = (await agent.call('next_task')).value.task;
      const parts = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => c.repeat(60_000));
      for (const p of parts) await agent.call('stream_write', { text: p });
      const first = (await viewer.call('stream_read', { task_id: task.id })).value;
      expect(first).toMatchObject({ from: 0, to: 5, more: true, end: null });
      expect(first.text).toBe(parts.slice(0, 5).join(''));
      const rest = (await viewer.call('stream_read', { task_id: task.id, from: first.to })).value;
      expect(rest).toMatchObject({ from: 5, to: 6, more: false, text: parts[5] });
    } finally {
      await agent.close();
      await viewer.close();
    }
  });
});
