import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { replyDroppingProxy } from '../helpers/reply-dropping-proxy.js';
import { dagCreate, databaseReset, rowsOf, leaseLapsedReaped } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { paidApiStart } from '../helpers/paid-api.js';
import { hasPython, pythonAgents } from '../helpers/python-agent.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// Durable steps of the Python agent (agents/python, ctx.step) against real processes and a real server: a process
// killed with SIGKILL between two steps, a step write whose reply is lost, and a process stopped (SIGSTOP) past its
// lease never make a paid call twice for a step that was recorded; a stale process's late write records nothing.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const reaper = reaperCreate({ db });

const paidApi = await paidApiStart();
const startPython = pythonAgents({ url: http.url, paidApiUrl: paidApi.url, agentToken: (id, caps, validators, models) => http.agentToken(id, caps, validators, models) });

/**
 * Between an agent and the server: forwards every request and its reply, except the first step write's reply, which
 * it reads from the server (the write has landed) and then drops by destroying the agent's connection.
 */
const proxied: Array<{ method: string; path: string; status: number; replyLost: boolean }> = [];
let loseNextStepReply = false;
const { url: proxyUrl } = await replyDroppingProxy(http.url, {
  drop: (req) => {
    const lost = loseNextStepReply && req.method === 'PUT' && req.url!.includes('/steps/');
    if (lost) loseNextStepReply = false;
    return lost;
  },
  seen: (x) => proxied.push({ method: x.req.method!, path: x.req.url!, status: x.status, replyLost: x.replyLost }),
});


/** The Python agent (test/fixtures/agents/stepper.py) as `agentId`. */
const agentStart = (agentId: string, args: string[] = [], url = http.url) => startPython('test/fixtures/agents/stepper.py', agentId, args, url);

/** The holder's lease, moved into the past, and the reaper takes the task back (immediate retry: READY again). */
const reaped = (agentId: string) => leaseLapsedReaped(db, reaper, agentId);

const DAG = (input: string) => `name: paid\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:
  t: { type: paid, spec: { constraints: { capabilities: [paid] }, input: ${input} } }\n`;
const task = async (dagId: string) => (await rowsOf<{ id: string; status: string; output: { results: unknown[] } | null; fence: number }>(db, sql`
  select id, status, output, fence from tasks where dag_id = ${dagId}`))[0]!;
const steps = () => rowsOf<{ name: string; fence: number; cost_usd: number; tokens_in: number; tokens_out: number; model: string | null }>(db, sql`
  select name, fence, cost_usd::float8 as cost_usd, tokens_in::int, tokens_out::int, model from task_steps order by name`);
const answers = (key: string, n: number) => Array.from({ length: n }, (_, i) => ({ answer: `/call/${key}/${i + 1}` }));

beforeEach(async () => {
  await databaseReset(db);
  paidApi.reset();
  proxied.length = 0;
  loseNextStepReply = false;
});

describe.sequential('durable steps of the Python agent', () => {
  it.skipIf(!hasPython)('SIGKILLed after its third recorded step: the next agent replays three and makes two calls, five paid calls in all', async () => {
    const checkpoint = paidApi.hold('/checkpoint/3');
    const dagId = await dagCreate(db, DAG('{ calls: 5, checkpoint_after: 3 }'));
    const first = await agentStart('py-a');
    await checkpoint.arrived;
    // Step 3 is recorded (ctx.step returned) and call 4 is not yet sent.
    expect(paidApi.calls.map((c) => c.path)).toEqual(['/call/t/1', '/call/t/2', '/call/t/3']);
    expect((await steps()).map((s) => s.name)).toEqual(['call 1', 'call 2', 'call 3']);
    const firstFence = (await task(dagId)).fence;
    first.child.kill('SIGKILL');
    expect((await first.stopped).signal).toBe('SIGKILL');
    await reaped('py-a');

    const second = await agentStart('py-b', ['--max-tasks', '1']);
    expect((await second.stopped).code, second.output()).toBe(0);
    const done = await task(dagId);
    expect(done.status).toBe('completed');
    expect(done.output).toEqual({ results: answers('t', 5) });
    expect(paidApi.calls).toEqual([
      ...[1, 2, 3].map((i) => ({ path: `/call/t/${i}`, agent: 'py-a' })),
      ...[4, 5].map((i) => ({ path: `/call/t/${i}`, agent: 'py-b' })),
    ]);
    // Each step recorded once, with what the handler reported spending inside it.
    expect((await steps()).map((s) => [s.name, s.fence === firstFence ? 'a' : 'b', s.cost_usd, s.tokens_in, s.tokens_out, s.model])).toEqual([
      ['call 1', 'a', 0.01, 10, 5, 'paid'], ['call 2', 'a', 0.01, 10, 5, 'paid'], ['call 3', 'a', 0.01, 10, 5, 'paid'],
      ['call 4', 'b', 0.01, 10, 5, 'paid'], ['call 5', 'b', 0.01, 10, 5, 'paid'],
    ]);
    // The attempt that completed paid for two calls (the steps' cost is the attempt's too) and replayed three.
    const [completed] = await rowsOf<{ cost: number; tokens_in: number }>(db, sql`
      select cost_usd::float8 as cost, tokens_in::int from attempts where outcome = 'completed'`);
    expect(completed!.cost).toBeCloseTo(0.02);
    expect(completed!.tokens_in).toBe(20);
    const logs = await http.call('GET', `/api/tasks/${done.id}/logs`);
    expect(logs.body.attempt.entries.filter((e: { message: string }) => e.message === 'step replayed').map((e: { fields: unknown }) => e.fields)).toEqual(
      [1, 2, 3].map((i) => ({ step: `call ${i}`, recordedByAttempt: expect.any(Number), costUsd: 0.01 })),
    );
    // The server recorded the three replays with what they had cost, under the completing attempt's fence.
    const listed = await http.call('GET', `/api/tasks/${done.id}/steps`);
    expect(listed.body.replays.map((r: { name: string; fence: number; recordedFence: number; costUsd: number }) => [r.name, r.fence === firstFence, r.recordedFence === firstFence, r.costUsd]))
      .toEqual([1, 2, 3].map((i) => [`call ${i}`, false, true, 0.01]));
  });

  it.skipIf(!hasPython)('a step write whose reply is lost is sent again: recorded once, the paid call made once, the task completed', async () => {
    loseNextStepReply = true;
    const dagId = await dagCreate(db, DAG('{ calls: 2 }'));
    const agent = await agentStart('py-lossy', ['--max-tasks', '1'], proxyUrl);
    expect((await agent.stopped).code, agent.output()).toBe(0);
    const done = await task(dagId);
    expect(done.status).toBe('completed');
    expect(done.output).toEqual({ results: answers('t', 2) });
    expect(paidApi.calls.map((c) => c.path)).toEqual(['/call/t/1', '/call/t/2']);
    // The first write landed (201) and its reply never reached the agent; the same write again answered the recorded step.
    const writes = proxied.filter((p) => p.method === 'PUT').map((p) => [decodeURIComponent(p.path.split('/steps/')[1]!), p.status, p.replyLost]);
    expect(writes).toEqual([['call 1', 201, true], ['call 1', 200, false], ['call 2', 201, false]]);
    expect(agent.output()).toMatch(/step "call 1" record: \w+.*; retrying in/);
    expect((await steps()).map((s) => [s.name, s.fence, s.cost_usd])).toEqual([['call 1', done.fence, 0.01], ['call 2', done.fence, 0.01]]);
    const attempts = await rowsOf<{ outcome: string; cost: number }>(db, sql`select outcome, cost_usd::float8 as cost from attempts`);
    expect(attempts).toEqual([{ outcome: 'completed', cost: expect.closeTo(0.02) }]);
  });

  it.skipIf(!hasPython)('SIGSTOPped past its lease: after SIGCONT its late step write is refused and nothing is recorded under its fence', async () => {
    const late = paidApi.hold('/call/t/1');
    // Free calls: a cost report from the step would be refused first (python-usage.test.ts), and the write never sent.
    const dagId = await dagCreate(db, DAG('{ calls: 2, free: true }'));
    const stopped = await agentStart('py-stopped');
    await late.arrived;
    const staleFence = (await task(dagId)).fence;
    stopped.child.kill('SIGSTOP');
    try {
      await reaped('py-stopped');
      const other = await agentStart('py-other', ['--max-tasks', '1']);
      expect((await other.stopped).code, other.output()).toBe(0);
      expect((await task(dagId)).status).toBe('completed');
      // The stopped process's call gets its answer, and it resumes: its step write comes under a stale fence.
      late.answer();
    } finally {
      stopped.child.kill('SIGCONT');
    }
    await eventually('the stale write was refused', async () => /step "call 1" not recorded: the lease was lost/.test(stopped.output()))
      .catch((e: Error) => { throw new Error(`${e.message}\n${stopped.output()}`); });
    const recorded = await steps();
    expect(recorded.map((s) => s.name)).toEqual(['call 1', 'call 2']);
    expect(recorded.filter((s) => s.fence === staleFence)).toEqual([]);
    expect((await task(dagId)).output).toEqual({ results: answers('t', 2) });
    // The refused write ended the stopped agent's handler: it made no call past the one it was stopped in.
    expect(paidApi.calls).toEqual([
      { path: '/call/t/1', agent: 'py-other' }, { path: '/call/t/2', agent: 'py-other' }, { path: '/call/t/1', agent: 'py-stopped' },
    ]);
  });

  it.skipIf(!hasPython)('a name used twice in one attempt fails it with a clear message; a step that raises or returns what JSON cannot encode records nothing; an attempt-scoped step runs in every attempt', async () => {
    const spec = (input: string) => `{ constraints: { capabilities: [paid] }, input: ${input} }`;
    const dagId = await dagCreate(db, `name: step-errors\ntasks:
  reuse: { type: paid, max_attempts: 1, spec: ${spec('{ calls: 1, reuse_name: true }')} }
  flaky: { type: paid, max_attempts: 2, retry: { strategy: immediate }, spec: ${spec('{ calls: 1, raise_in_step_once: true, attempt_step: true }')} }
  unstorable: { type: paid, max_attempts: 1, spec: ${spec('{ calls: 1, unstorable: true }')} }\n`);
    const agent = await agentStart('py-errors', ['--exit-when-idle', '1']);
    expect((await agent.stopped).code, agent.output()).toBe(0);
    const attempts = async (key: string) => rowsOf<{ outcome: string; error_class: string | null; error_message: string | null; fence: number }>(db, sql`
      select a.outcome, a.error_class, a.error_message, a.fence from attempts a join tasks t on t.id = a.task_id
      where t.dag_id = ${dagId} and t.key = ${key} order by a.fence`);
    const stepsOf = async (key: string) => rowsOf<{ name: string; scope: string; fence: number }>(db, sql`
      select s.name, s.scope, s.fence from task_steps s join tasks t on t.id = s.task_id where t.dag_id = ${dagId} and t.key = ${key}
      order by s.fence, s.name`);
    const paidCalls = (key: string) => paidApi.calls.filter((c) => c.path.startsWith(`/call/${key}/`)).map((c) => c.path);

    // The second "call 1" is refused before its function runs; the first stays recorded.
    expect(await attempts('reuse')).toEqual([{
      outcome: 'failed', error_class: 'error', fence: expect.any(Number),
      error_message: 'step "call 1": the name is already used in this attempt; each step of an attempt needs a name of its own',
    }]);
    expect(paidCalls('reuse')).toEqual(['/call/reuse/1']);
    expect((await stepsOf('reuse')).map((s) => s.name)).toEqual(['call 1']);

    // The step raised after its call: nothing recorded, so the retry made the call again, and recorded it. The
    // attempt-scoped step ran in each attempt, never replayed.
    const flaky = await attempts('flaky');
    expect(flaky.map((a) => [a.outcome, a.error_message])).toEqual([['failed', 'the paid API answered nonsense'], ['completed', null]]);
    expect(paidCalls('flaky')).toEqual(['/call/flaky/1', '/call/flaky/1']);
    expect(await stepsOf('flaky')).toEqual([
      { name: 'attempt started', scope: 'attempt', fence: flaky[0]!.fence },
      { name: 'attempt started', scope: 'attempt', fence: flaky[1]!.fence }, { name: 'call 1', scope: 'task', fence: flaky[1]!.fence },
    ]);
    const [flakyTask] = await rowsOf<{ id: string; output: unknown }>(db, sql`select id, output from tasks where dag_id = ${dagId} and key = 'flaky'`);
    expect(flakyTask!.output).toEqual({ results: answers('flaky', 1), started: 2 });
    const logs = await http.call('GET', `/api/tasks/${flakyTask!.id}/logs?attempt=1`);
    expect(logs.body.attempt.entries).toEqual([expect.objectContaining({
      level: 'warn', message: 'step failed; nothing recorded', fields: { step: 'call 1', error: 'RuntimeError: the paid API answered nonsense' },
    })]);

    expect(await attempts('unstorable')).toEqual([{
      outcome: 'failed', error_class: 'error', fence: expect.any(Number),
      error_message: 'step "call 1": result cannot be stored as JSON: Object of type set is not JSON serializable; nothing was recorded',
    }]);
    expect(await stepsOf('unstorable')).toEqual([]);
    expect(paidCalls('unstorable')).toEqual(['/call/unstorable/1']);
  });
});
