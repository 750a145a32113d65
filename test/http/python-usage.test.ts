import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { dagCreate, databaseReset, rowsOf, leaseLapsedReaped } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { paidApiStart } from '../helpers/paid-api.js';
import { hasPython, pythonAgents } from '../helpers/python-agent.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// Spend of the Python agent (agents/python, ctx.report_cost) while its attempt runs, against real processes and a
// real server: a runaway agent is stopped at its task's max_cost_usd and goes on working; what an agent reported
// before it was killed stays in the ledger and is charged once; a report refused as LEASE_LOST drops the task.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
const reaper = reaperCreate({ db });
const paidApi = await paidApiStart();
const startPython = pythonAgents({ url: http.url, paidApiUrl: paidApi.url, agentToken: (id, caps, validators, models) => http.agentToken(id, caps, validators, models) });


beforeEach(async () => {
  await databaseReset(db);
  paidApi.reset();
});

/** The Python agent (test/fixtures/agents/runaway.py) as `agentId`. */
const agentStart = (agentId: string, args: string[] = []) => startPython('test/fixtures/agents/runaway.py', agentId, args);

/** The holder's lease, moved into the past, and the reaper takes the task back (immediate retry: READY again). */
const reaped = (agentId: string) => leaseLapsedReaped(db, reaper, agentId);

const DAG = (constraints: string, input: string) => `name: spend
defaults: { max_attempts: 3, retry: { strategy: immediate } }
tasks:
  t: { type: paid, spec: { constraints: { capabilities: [paid]${constraints} }, input: ${input} } }
`;
const task = async (dagId: string) => (await rowsOf<{ id: string; status: string; cost_usd: number; fence: number; output: unknown }>(db, sql`
  select id, status, cost_usd::float8 as cost_usd, fence, output from tasks where dag_id = ${dagId}`))[0]!;
const ledger = (dagId: string) => rowsOf<{ fence: number; cost: number; tokens_in: number; model: string }>(db, sql`
  select fence, cost_usd::float8 as cost, tokens_in::int, model from usage_reports where dag_id = ${dagId} order by id`);
const attempts = (dagId: string) => rowsOf<{ outcome: string; error_class: string | null; error_message: string | null; cost: number; tokens_in: number }>(db, sql`
  select a.outcome, a.error_class, a.error_message, a.cost_usd::float8 as cost, a.tokens_in::int from attempts a
  join tasks t on t.id = a.task_id where t.dag_id = ${dagId} order by a.fence`);
const dagSpend = async (dagId: string) => (await rowsOf<{ spent: number; reserved: number }>(db, sql`
  select spent_usd::float8 as spent, reserved_usd::float8 as reserved from dags where id = ${dagId}`))[0]!;
const sum = (rows: Array<{ cost: number }>) => rows.reduce((s, r) => s + r.cost, 0);

describe.sequential('spend of the Python agent while an attempt runs', () => {
  it.skipIf(!hasPython)('a runaway agent is stopped at max_cost_usd after 11 calls at 0.01, failed budget_exceeded, and goes on working', async () => {
    const dagId = await dagCreate(db, DAG(', max_cost_usd: 0.1', '{ usd_per_call: 0.01 }'));
    const agent = await agentStart('py-runaway');
    await eventually('the task stopped', async () => (await task(dagId)).status === 'dead_lettered', 30_000);
    // The report of the 11th call took the attempt past 0.10: it was charged, and the agent made no call after it.
    expect(paidApi.calls.map((c) => c.path)).toEqual(Array.from({ length: 11 }, (_, i) => `/call/${i + 1}`));
    const rows = await ledger(dagId);
    expect(rows.length).toBe(11);
    expect(sum(rows)).toBeCloseTo(0.11);
    expect(new Set(rows.map((r) => r.model))).toEqual(new Set(['paid']));
    const [attempt, ...more] = await attempts(dagId);
    expect(more).toEqual([]);
    expect(attempt).toEqual({
      outcome: 'failed', error_class: 'budget_exceeded', cost: 0.11, tokens_in: 1100,
      error_message: expect.stringContaining('task.max_cost_usd 0.1 reached'),
    });
    expect(await dagSpend(dagId)).toEqual({ spent: expect.closeTo(0.11), reserved: 0 });
    const [dead] = await rowsOf<{ reason: string }>(db, sql`select reason from dead_letters`);
    expect(dead!.reason).toMatch(/budget_exceeded/);
    await eventually('the agent saw the stop', async () => /t stopped at its spend limit \(failed budget_exceeded\): task\.max_cost_usd 0\.1 reached: 0\.11 USD spent/.test(agent.output()))
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    // The server failed the attempt: the agent neither completed nor failed it.
    expect(agent.output()).not.toMatch(/(complete|fail) t (->|refused)/);

    // Alive and not blamed for the stop: it takes the next task and completes it.
    expect(agent.child.exitCode).toBeNull();
    const nextDag = await dagCreate(db, DAG('', '{ calls: 2 }').replace('name: spend', 'name: next'));
    await eventually('the next task completed', async () => (await task(nextDag)).status === 'completed', 30_000);
    expect(paidApi.calls.slice(11)).toEqual([{ path: '/call/1', agent: 'py-runaway' }, { path: '/call/2', agent: 'py-runaway' }]);
    expect(await attempts(nextDag)).toEqual([{ outcome: 'completed', error_class: null, error_message: null, cost: 0.02, tokens_in: 200 }]);
  });

  it.skipIf(!hasPython)('killed with SIGKILL after five reported calls: the five are charged, and the retry adds its own once', async () => {
    // A max_cost_usd of 1 per attempt: report_cost answers what is left of it.
    const dagId = await dagCreate(db, DAG(', max_cost_usd: 1', '{ calls: 8 }'));
    const sixth = paidApi.hold('/call/6');
    const first = await agentStart('py-killed');
    await sixth.arrived;
    // report_cost returned before the sixth call: the five reports are durable, charged to the task and its DAG.
    const firstFence = (await task(dagId)).fence;
    expect((await ledger(dagId)).map((r) => [r.fence, r.cost])).toEqual(Array.from({ length: 5 }, () => [firstFence, 0.01]));
    expect((await dagSpend(dagId)).spent).toBeCloseTo(0.05);
    expect((await task(dagId)).cost_usd).toBeCloseTo(0.05);
    first.child.kill('SIGKILL');
    expect((await first.stopped).signal).toBe('SIGKILL');
    await reaped('py-killed');

    const second = await agentStart('py-next', ['--max-tasks', '1']);
    expect((await second.stopped).code, second.output()).toBe(0);
    const done = await task(dagId);
    expect(done.status).toBe('completed');
    expect(done.output).toEqual({ calls: 8, attempt_cost_usd: 0.08, remaining_usd: 0.92 });
    const rows = await ledger(dagId);
    expect(rows.filter((r) => r.fence === firstFence).length).toBe(5);
    expect(rows.filter((r) => r.fence === done.fence).length).toBe(8);
    // The completion carried no cost: nothing was charged twice.
    expect(done.cost_usd).toBeCloseTo(0.13);
    const ended = await attempts(dagId);
    // `lapsed` when it died before its first heartbeat (taken for a lost claim reply), else `failed` (crash): both keep its usage.
    expect(ended.map((a) => a.outcome)).toEqual([expect.stringMatching(/^(lapsed|failed)$/), 'completed']);
    expect(ended.map((a) => [a.cost, a.tokens_in])).toEqual([[0.05, 500], [0.08, 800]]);
    expect(await dagSpend(dagId)).toEqual({ spent: expect.closeTo(0.13), reserved: 0 });
  });

  it.skipIf(!hasPython)('a usage report refused as LEASE_LOST drops the task: the paid call is charged to the attempt that ended, nothing more reported', async () => {
    // Heartbeats far apart: after the first, the report is the next thing the agent sends.
    const dagId = await dagCreate(db, DAG(', heartbeat_sec: 600', '{ calls: 2 }'));
    const late = paidApi.hold('/call/1');
    const agent = await agentStart('py-late', ['--max-tasks', '2']);
    await late.arrived;
    const staleFence = (await task(dagId)).fence;
    await eventually('the first heartbeat', async () => (await rowsOf<{ beat: boolean }>(db, sql`
      select heartbeat_at > claimed_at as beat from tasks where dag_id = ${dagId}`))[0]!.beat);
    await reaped('py-late');
    late.answer();
    // It drops the task and claims it again (READY: an immediate retry), as a new attempt that completes.
    await eventually('completed by its next attempt', async () => (await task(dagId)).status === 'completed', 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${agent.output()}`); });
    expect(agent.output()).toMatch(/usage of 0\.01 USD charged to the attempt that ended: the lease was lost/);
    expect(agent.output()).toMatch(/lease lost on t; dropping it/);
    // The call it paid for before it learnt the task was gone: charged once, to the attempt the reaper ended.
    const rows = await ledger(dagId);
    expect(rows.filter((r) => r.fence === staleFence).map((r) => r.cost)).toEqual([0.01]);
    expect(rows.length).toBe(3);
    expect((await task(dagId)).cost_usd).toBeCloseTo(0.03);
    expect((await attempts(dagId)).map((a) => [a.outcome, a.cost])).toEqual([[expect.any(String), 0.01], ['completed', 0.02]]);
    expect(paidApi.calls.map((c) => c.path)).toEqual(['/call/1', '/call/1', '/call/2']);
  });

  it.skipIf(!hasPython)('a negative cost or fractional tokens raise ValueError before anything is sent: the attempt fails with it, nothing charged', async () => {
    const dagId = await dagCreate(db, `name: bad-figures\ndefaults: { max_attempts: 1, constraints: { capabilities: [paid] } }\ntasks:
  negative: { type: paid, spec: { input: { calls: 1, usd_per_call: -0.01 } } }
  fractional: { type: paid, spec: { input: { calls: 1, tokens_in: 1.5 } } }\n`);
    const agent = await agentStart('py-bad', ['--exit-when-idle', '1']);
    expect((await agent.stopped).code, agent.output()).toBe(0);
    const failures = await rowsOf<{ key: string; outcome: string; error_class: string; error_message: string }>(db, sql`
      select t.key, a.outcome, a.error_class, a.error_message from attempts a join tasks t on t.id = a.task_id order by t.key`);
    expect(failures).toEqual([
      { key: 'fractional', outcome: 'failed', error_class: 'error', error_message: 'report_cost: tokens_in 1.5: expected a whole number from 0' },
      { key: 'negative', outcome: 'failed', error_class: 'error', error_message: 'report_cost: usd -0.01: expected a finite number from 0' },
    ]);
    expect(await ledger(dagId)).toEqual([]);
  });
});
