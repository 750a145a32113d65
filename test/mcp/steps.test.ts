import { beforeEach, describe, expect, it, vi } from 'vitest';
import { sql } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

// A small step result limit, to refuse a result over it without a megabyte body: set before any module reads the
// limits, which each process reads once (the stdio server inherits it).
vi.hoisted(() => { process.env.DAGENT_LIMIT_STEP_RESULT_BYTES = '4096'; });

const { tokenCreate } = await import('../../src/auth/tokens.js');
const { reaperCreate } = await import('../../src/maintenance/reaper.js');
const { testDatabase } = await import('../helpers/db.js');
const { testHttp } = await import('../helpers/http.js');
const { CLI_COMPILED } = await import('../helpers/cli.js');
const { dagCreate, databaseReset, leaseExpire, rowsOf } = await import('../helpers/factories.js');
const { eventually } = await import('../helpers/wait.js');
const { paidApiStart } = await import('../helpers/paid-api.js');

/**
 * Durable steps for an agent working through MCP: a "model" (the test, driving the tools with the SDK's client)
 * looks each expensive call up with step_get and records it with step_record, so the attempt after a dead session
 * pays only for what was not recorded. The session keeps the fence: a session that lost its hold is refused.
 */
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const reaper = reaperCreate({ db });
beforeEach(() => databaseReset(db));

type Tool = (name: string, args?: Record<string, unknown>) => Promise<{ isError: boolean; value: any; text: string }>;

function caller(client: Client): Tool {
  return async (name, args = {}) => {
    const r = await client.callTool({ name, arguments: args });
    const text = (r.content as Array<{ type: string; text: string }>)[0]!.text;
    return { isError: !!r.isError, text, value: r.isError ? undefined : JSON.parse(text) };
  };
}

async function overHttp(token: string): Promise<{ client: Client; call: Tool; close: () => Promise<void> }> {
  const client = new Client({ name: 'scripted-model', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${http.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  // DELETE /mcp ends the session without releasing what it holds: its heartbeats stop, the reaper takes it back.
  return { client, call: caller(client), close: async () => { await transport.terminateSession().catch(() => {}); await client.close(); } };
}

const agentToken = async (agentId: string, maxConcurrent = 1) =>
  (await tokenCreate(db, { role: 'agent', agentId, capabilities: ['paid'], models: ['harness-model'], maxConcurrent })).token;

const DAG = (keys = ['t']) => `name: paid-mcp\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n${keys.map((k) => `  ${k}: { type: paid, spec: { constraints: { capabilities: [paid] } } }\n`).join('')}`;

type StepRow = { name: string; fence: number; scope: string; result: unknown; cost_usd: number; tokens_in: number; model: string | null; duration_ms: number | null };
const stepRows = () => rowsOf<StepRow>(db, sql`
  select name, fence, scope, result, cost_usd::float8 as cost_usd, tokens_in::int as tokens_in, model, duration_ms from task_steps order by recorded_at, name`);

/** The session's first heartbeat ("received"): the next is heartbeat_sec (20 s) away, so a lease moved into the past stays lapsed. */
const receivedBeat = (taskId: string) => eventually('the session\'s first heartbeat', async () =>
  (await rowsOf(db, sql`select 1 from tasks where id = ${taskId} and heartbeat_at > claimed_at`)).length > 0);

/** The task's lease moved into the past and the reaper takes it back: READY again (immediate retry). */
async function takenBack(taskId: string): Promise<void> {
  await leaseExpire(db, taskId);
  expect(await reaper.runOnce()).toBe(1);
}

describe('step_get and step_record over MCP', () => {
  it('an agent token has both tools; a read token has neither', async () => {
    const agent = await overHttp(await agentToken('lister'));
    const { token: read } = await tokenCreate(db, { role: 'read', name: 'viewer' });
    const viewer = await overHttp(read);
    try {
      expect((await agent.client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['step_get', 'step_record']));
      const readerTools = (await viewer.client.listTools()).tools.map((t) => t.name);
      expect(readerTools).not.toContain('step_record');
      expect(readerTools).not.toContain('step_get');
      expect((await viewer.call('step_record', { name: 'x', result: 1 })).text).toMatch(/Tool step_record not found/);
    } finally {
      await agent.close();
      await viewer.close();
    }
    expect(await stepRows()).toEqual([]);
  });

  it('looks a step up (not recorded), records it with its spend, and refuses a second use of the name in the attempt', async () => {
    await dagCreate(db, DAG());
    const s = await overHttp(await agentToken('recorder'));
    try {
      const task = (await s.call('next_task')).value.task;
      expect((await s.call('step_get', { name: 'call-1' })).value).toMatchObject({ recorded: false });
      const recorded = await s.call('step_record', {
        name: 'call-1', result: { answer: 1 }, duration_ms: 40, cost_usd: 0.01, tokens_in: 12, model: 'harness-model',
      });
      expect(recorded.value).toEqual({ recorded: true, result: { answer: 1 } });
      expect((await s.call('step_record', { task_id: task.id, name: 'scratch', result: null, scope: 'attempt' })).value).toEqual({ recorded: true, result: null });

      // The same record again, as after a lost reply: answered with what was recorded, nothing new written.
      expect((await s.call('step_record', { name: 'call-1', result: { answer: 1 }, cost_usd: 0.01 })).value).toEqual({ recorded: true, result: { answer: 1 } });
      // One name, one step of the attempt: a loop that reused "call-1" would be handed the first call's result.
      const getAgain = await s.call('step_get', { name: 'call-1' });
      expect(getAgain.text).toBe('INVALID_INPUT: step "call-1": the name is already used in this attempt; each step of an attempt needs a name of its own (in a loop: call-1, call-2, …)');
      expect((await s.call('step_record', { name: 'call-1', result: { answer: 'other' } })).text).toMatch(/^INVALID_INPUT: step "call-1": the name is already used in this attempt/);

      const [fence] = (await rowsOf<{ fence: number }>(db, sql`select fence from tasks where id = ${task.id}`)).map((r) => r.fence);
      expect(await stepRows()).toEqual([
        { name: 'call-1', fence, scope: 'task', result: { answer: 1 }, cost_usd: 0.01, tokens_in: 12, model: 'harness-model', duration_ms: 40 },
        { name: 'scratch', fence, scope: 'attempt', result: null, cost_usd: 0, tokens_in: 0, model: null, duration_ms: null },
      ]);
      // Still the session's task: it completes.
      expect((await s.call('complete', { output: { done: true } })).value).toMatchObject({ completed: true });
    } finally {
      await s.close();
    }
  });

  it('bad input is a clear error that records nothing, and leaves the name free', async () => {
    await dagCreate(db, DAG());
    const s = await overHttp(await agentToken('careless'));
    try {
      await s.call('next_task');
      const control = await s.call('step_record', { name: 'call\n1', result: 1 });
      expect(control.text).toBe('INVALID_INPUT: step "call\\n1": name must not contain control characters');
      expect((await s.call('step_get', { name: 'call\u00071' })).text).toBe('INVALID_INPUT: step "call\\u00071": name must not contain control characters');
      expect((await s.call('step_record', { name: '', result: 1 })).text).toBe('INVALID_INPUT: step "": name must be 1-200 characters, not 0');
      const big = await s.call('step_record', { name: 'big', result: 'x'.repeat(5000) });
      expect(big.text).toBe('INVALID_INPUT: step "big": result is 5002 bytes as JSON; at most 4096 (stepResultBytes, DAGENT_LIMIT_STEP_RESULT_BYTES); nothing was recorded');
      const noResult = await s.call('step_record', { name: 'empty' });
      expect([noResult.isError, noResult.text]).toEqual([true, expect.stringMatching(/Invalid arguments for tool step_record: required: the work's result as JSON \(null for none\) at result$/)]);
      expect((await s.call('step_record', { name: 'odd', result: 1, scope: 'forever' })).text).toMatch(/Invalid arguments for tool step_record.*scope/s);
      expect((await s.call('step_record', { name: 'priced', result: 1, model: 'not-granted' })).text).toMatch(/^INVALID_INPUT: model: /);
      expect(await stepRows()).toEqual([]);

      // Nothing was recorded, so the name is still this attempt's to use.
      expect((await s.call('step_record', { name: 'big', result: 'x'.repeat(100) })).value).toMatchObject({ recorded: true });
      expect((await s.call('step_record', { name: 'priced', result: 1 })).value).toMatchObject({ recorded: true });
      expect((await stepRows()).map((r) => r.name)).toEqual(['big', 'priced']);
    } finally {
      await s.close();
    }
  });

  it('the next attempt\'s session replays what the first recorded: recorded: false for the rest, first write wins', async () => {
    await dagCreate(db, DAG());
    const token = await agentToken('replayer');
    const first = await overHttp(token);
    const task = (await first.call('next_task')).value.task;
    await first.call('step_record', { name: 'call-1', result: { answer: 1 }, cost_usd: 0.02 });
    await first.call('step_record', { name: 'call-2', result: { answer: 2 } });
    await first.close();
    await takenBack(task.id);

    const second = await overHttp(token);
    try {
      const again = (await second.call('next_task')).value.task;
      expect(again.id).toBe(task.id);
      expect((await second.call('step_get', { name: 'call-1' })).value).toEqual({
        recorded: true, result: { answer: 1 }, recorded_by_attempt: 1, next: 'Use this result; do not do this work again.',
      });
      expect((await second.call('step_get', { name: 'call-3' })).value).toMatchObject({ recorded: false });
      // Recorded before: the earlier result stands and is the one to use.
      expect((await second.call('step_record', { name: 'call-2', result: { answer: 'again' } })).value).toMatchObject({ recorded: false, result: { answer: 2 } });
      expect((await second.call('step_record', { name: 'call-3', result: { answer: 3 } })).value).toEqual({ recorded: true, result: { answer: 3 } });
      expect((await second.call('complete', { output: { answers: [1, 2, 3] } })).value).toMatchObject({ completed: true });
    } finally {
      await second.close();
    }
    expect((await stepRows()).map((r) => [r.name, r.result])).toEqual([['call-1', { answer: 1 }], ['call-2', { answer: 2 }], ['call-3', { answer: 3 }]]);
    // The second attempt did not pay again for call-1: its replay is recorded under that attempt, with its cost.
    const [attempt] = await rowsOf<{ replayed: number }>(db, sql`select sum(r.cost_usd)::float8 as replayed from task_step_replays r join attempts a on a.task_id = r.task_id and a.fence = r.fence where a.outcome = 'completed'`);
    expect(attempt!.replayed).toBe(0.02);
  });

  it('a session that no longer holds its task is refused, LEASE_LOST, by both tools, and records nothing', async () => {
    await dagCreate(db, DAG(['a', 'b']));
    const token = await agentToken('lapsed', 2);
    const s = await overHttp(token);
    try {
      const a = (await s.call('next_task')).value.task;
      const b = (await s.call('next_task')).value.task;
      expect((await s.call('step_record', { task_id: a.id, name: 'before', result: 1 })).value).toMatchObject({ recorded: true });
      await receivedBeat(a.id);
      await receivedBeat(b.id);
      await leaseExpire(db, a.id);
      await leaseExpire(db, b.id);
      const get = await s.call('step_get', { task_id: a.id, name: 'before-2' });
      expect(get.text).toMatch(new RegExp(`^LEASE_LOST: .*task ${a.id}.*running, lease lapsed.*Stop working on it; do not retry this call`, 's'));
      const record = await s.call('step_record', { task_id: b.id, name: 'late', result: { paid: true } });
      expect(record.text).toMatch(new RegExp(`^LEASE_LOST: .*task ${b.id}.*lease lapsed`, 's'));
      // The session let both go, as after any LEASE_LOST: later calls about them are the usual refusals.
      expect((await s.call('step_record', { task_id: b.id, name: 'late', result: 1 })).text).toMatch(/^FORBIDDEN: you do not hold task/);
      expect((await s.call('step_get', { name: 'late' })).text).toMatch(/^INVALID_INPUT: you hold no task/);
      expect((await stepRows()).map((r) => r.name)).toEqual(['before']);

      // Reaped, and claimed again (each by an agent of its own: tasks that died together run alone): the refused
      // write left nothing for the next attempt to replay.
      expect(await reaper.runOnce()).toBe(2);
      const next = [await overHttp(await agentToken('next-1')), await overHttp(await agentToken('next-2'))];
      try {
        const byTask = new Map<string, Tool>();
        for (const n of next) byTask.set((await n.call('next_task')).value.task.id, n.call);
        expect([...byTask.keys()].sort()).toEqual([a.id, b.id].sort());
        expect((await byTask.get(b.id)!('step_get', { name: 'late' })).value).toMatchObject({ recorded: false });
        expect((await byTask.get(a.id)!('step_get', { name: 'before' })).value).toMatchObject({ recorded: true, result: 1 });
      } finally {
        for (const n of next) await n.close();
      }
    } finally {
      await s.close();
    }
  });
});

/** The paid API the "model" calls; each call's x-agent header names the session that made it. */
const paidApi = await paidApiStart();

/**
 * The "model": calls 1-5 to the paid API, each a step (looked up first, recorded after the call), until `stopAfter`;
 * with all five, it completes the task with their results.
 */
async function paidWork(call: Tool, who: string, stopAfter = 5): Promise<void> {
  const results: unknown[] = [];
  for (let i = 1; i <= stopAfter; i++) {
    const name = `call-${i}`;
    const found = await call('step_get', { name });
    expect(found.isError, found.text).toBe(false);
    if (found.value.recorded) {
      results.push(found.value.result);
      continue;
    }
    const answer = await (await fetch(`${paidApi.url}/call/${i}`, { headers: { 'x-agent': who } })).json();
    const recorded = await call('step_record', { name, result: answer, cost_usd: 0.01, tokens_in: 100, model: 'harness-model' });
    expect(recorded.value, recorded.text).toEqual({ recorded: true, result: answer });
    results.push(answer);
  }
  if (stopAfter === 5) expect((await call('complete', { output: { results }, cost_usd: 0.02, model: 'harness-model' })).value).toMatchObject({ completed: true });
}

/** A session that dies after the third recorded call, without releasing its task, as a crashed client's does. */
const dyingSessions = {
  'dagent mcp (stdio), killed with SIGKILL': async (token: string) => {
    const transport = new StdioClientTransport({
      command: process.execPath, args: [...CLI_COMPILED, 'mcp'],
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_TOKEN: token, DAGENT_LOG_LEVEL: 'warn' } as Record<string, string>, stderr: 'pipe',
    });
    const client = new Client({ name: 'stdio-model', version: '1.0.0' });
    await client.connect(transport);
    return {
      call: caller(client),
      die: async () => {
        process.kill(transport.pid!, 'SIGKILL');
        await eventually('the stdio server exited', async () => {
          try { process.kill(transport.pid!, 0); return false; } catch { return true; }
        });
        await client.close().catch(() => {});
      },
    };
  },
  'streamable HTTP, the session ended without a release': async (token: string) => {
    const s = await overHttp(token);
    return { call: s.call, die: s.close };
  },
};

describe('a paid call is made once per step across a dead MCP session', () => {
  beforeEach(() => paidApi.reset());
  for (const [how, open] of Object.entries(dyingSessions)) {
    it(`${how} after its third call: the next session replays three and calls 4 and 5; the paid API answered 5 calls`, async () => {
      const dagId = await dagCreate(db, DAG());
      const token = await agentToken('paying');
      const first = await open(token);
      const task = (await first.call('next_task')).value.task;
      await paidWork(first.call, 'first', 3);
      expect(paidApi.calls.map((c) => c.path)).toEqual(['/call/1', '/call/2', '/call/3']);
      await first.die();
      await takenBack(task.id);

      const second = await overHttp(token);
      try {
        expect((await second.call('next_task')).value.task.id).toBe(task.id);
        await paidWork(second.call, 'second');
      } finally {
        await second.close();
      }
      expect(paidApi.calls).toEqual([
        ...[1, 2, 3].map((i) => ({ path: `/call/${i}`, agent: 'first' })),
        ...[4, 5].map((i) => ({ path: `/call/${i}`, agent: 'second' })),
      ]);
      const [done] = await rowsOf<{ status: string; output: unknown; fence: number }>(db, sql`select status, output, fence from tasks where dag_id = ${dagId}`);
      expect(done).toMatchObject({ status: 'completed', output: { results: [1, 2, 3, 4, 5].map((i) => ({ answer: `/call/${i}` })) } });
      const steps = await stepRows();
      expect(steps.map((s) => [s.name, s.fence === done!.fence ? 'second' : 'first', s.cost_usd])).toEqual([
        ['call-1', 'first', 0.01], ['call-2', 'first', 0.01], ['call-3', 'first', 0.01], ['call-4', 'second', 0.01], ['call-5', 'second', 0.01],
      ]);
      const [attempt] = await rowsOf<{ replayed: number }>(db, sql`select sum(r.cost_usd)::float8 as replayed from task_step_replays r join attempts a on a.task_id = r.task_id and a.fence = r.fence where a.outcome = 'completed'`);
      expect(attempt!.replayed).toBeCloseTo(0.03);
    });
  }
});

describe('report_usage over MCP', () => {
  it('charges each report at once; the one that passes max_cost_usd stops the task, which is no longer the session\'s', async () => {
    await dagCreate(db, `name: runaway-mcp\ntasks:\n  t: { type: paid, spec: { constraints: { capabilities: [paid], max_cost_usd: 0.1 } } }\n`);
    const s = await overHttp(await agentToken('spender'));
    try {
      const task = (await s.call('next_task')).value.task;
      paidApi.reset();
      let last: any;
      // A runaway "model": a call to a paid API, then its report, until a report says stop.
      for (let i = 1; i <= 20 && !last?.stopped; i++) {
        await fetch(`${paidApi.url}/call/${i}`, { method: 'POST', headers: { 'x-agent': 'spender' } });
        last = (await s.call('report_usage', { cost_usd: 0.01, tokens_in: 100, model: 'harness-model' })).value;
      }
      expect(paidApi.calls.length).toBe(11);
      expect(last).toMatchObject({ attempt_cost_usd: 0.11, remaining_usd: 0, stopped: { limit: 'task.max_cost_usd', limitUsd: 0.1, spentUsd: 0.11 } });
      const [row] = await rowsOf<{ status: string; cost: number }>(db, sql`select status, cost_usd::float8 as cost from tasks where id = ${task.id}`);
      expect(row).toEqual({ status: 'dead_lettered', cost: 0.11 });
      const [attempt] = await rowsOf<{ error_class: string; cost: number }>(db, sql`select error_class, cost_usd::float8 as cost from attempts where task_id = ${task.id}`);
      expect(attempt).toEqual({ error_class: 'budget_exceeded', cost: 0.11 });
      // The next call about it says why it is gone.
      expect((await s.call('report_usage', { cost_usd: 0.01 })).text).toMatch(/^LEASE_LOST: task \S+ is no longer yours \(stopped: task\.max_cost_usd 0\.1 reached/);
      expect((await s.call('report_usage', { cost_usd: -1 })).isError).toBe(true);
    } finally {
      await s.close();
    }
  });
});
