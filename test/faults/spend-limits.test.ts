import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { paidApiStart } from '../helpers/paid-api.js';
import { eventually } from '../helpers/wait.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// Spend while an attempt runs, against real agent processes (`dagent agent run`): a runaway agent is stopped at its
// task's max_cost_usd, and what an agent reported before it was killed stays in the ledger and is charged once.
const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);
const reaper = reaperCreate({ db });
const paidApi = await paidApiStart();
// The runaway fixture, in the agent processes, reads it from their environment.
process.env.DAGENT_TEST_PAID_API = paidApi.url;
afterAll(() => { delete process.env.DAGENT_TEST_PAID_API; });
beforeEach(async () => {
  paidApi.reset();
  await databaseReset(db);
});

const RUNAWAY = 'test/fixtures/agents/runaway.ts';
const DAG = (constraints: string, input: string) => `name: spend
defaults: { max_attempts: 3, retry: { strategy: immediate } }
tasks:
  t: { type: paid, spec: { constraints: { capabilities: [paid]${constraints} }, input: ${input} } }
`;
const task = async (dagId: string) => (await rowsOf<{ id: string; status: string; cost_usd: number; fence: number }>(db, sql`
  select id, status, cost_usd::float8 as cost_usd, fence from tasks where dag_id = ${dagId}`))[0]!;
const ledger = () => rowsOf<{ fence: number; cost: number; model: string }>(db, sql`
  select fence, cost_usd::float8 as cost, model from usage_reports order by id`);

describe('spend limits while an attempt runs', () => {
  it('a runaway agent is stopped at max_cost_usd: 11 calls at 0.01 for a limit of 0.10, failed budget_exceeded, all of it in the ledger', async () => {
    const dagId = await dagCreate(db, DAG(', max_cost_usd: 0.1', '{ usdPerCall: 0.01 }'));
    const agent = await agentProcess(RUNAWAY, 'runaway-1');
    await eventually('the task stopped', async () => (await task(dagId)).status === 'dead_lettered', 30_000);
    // The report of the 11th call took the attempt past 0.10: it was charged, and the agent made no call after it.
    expect(paidApi.calls.map((c) => c.path)).toEqual(Array.from({ length: 11 }, (_, i) => `/call/${i + 1}`));
    const rows = await ledger();
    expect(rows.reduce((s, r) => s + r.cost, 0)).toBeCloseTo(0.11);
    expect(new Set(rows.map((r) => r.model))).toEqual(new Set(['paid']));
    const [attempt] = await rowsOf<{ outcome: string; error_class: string; cost: number; tokens_in: number }>(db, sql`
      select outcome, error_class, cost_usd::float8 as cost, tokens_in::int from attempts`);
    expect(attempt).toEqual({ outcome: 'failed', error_class: 'budget_exceeded', cost: 0.11, tokens_in: 1100 });
    const [dag] = await rowsOf<{ spent: number; reserved: number }>(db, sql`select spent_usd::float8 as spent, reserved_usd::float8 as reserved from dags`);
    expect(dag!.spent).toBeCloseTo(0.11);
    expect(dag!.reserved).toBe(0);
    const [dead] = await rowsOf<{ reason: string }>(db, sql`select reason from dead_letters`);
    expect(dead!.reason).toMatch(/budget_exceeded/);
    // The agent goes on: it is not blamed for the task it was stopped in. (It logs the stop once the failure it
    // wrote is recorded, so the line may follow the task's new status by a moment.)
    await eventually('the agent logged the stop', async () => /stopped at its spend limit/.test(agent.output()));
    expect(agent.child.exitCode).toBeNull();
  });

  it('asking before each call (ctx.budgetFits), the same agent makes 10 calls, stops itself at 0.10 and completes', async () => {
    const dagId = await dagCreate(db, DAG(', max_cost_usd: 0.1', '{ usdPerCall: 0.01, preflight: true }'));
    await agentProcess(RUNAWAY, 'careful-1');
    await eventually('the task completed', async () => (await task(dagId)).status === 'completed', 30_000);
    expect(paidApi.calls.length).toBe(10);
    expect((await ledger()).reduce((s, r) => s + r.cost, 0)).toBeCloseTo(0.1);
    const [t] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where dag_id = ${dagId}`);
    expect(t!.output).toEqual({ calls: 10, stoppedBefore: 'the next call would pass a limit' });
  });

  it('killed with SIGKILL after five reported calls: the five are in the ledger and charged, and the retry adds its own once', async () => {
    const dagId = await dagCreate(db, DAG('', '{ calls: 8 }'));
    const sixth = paidApi.hold('/call/6');
    const first = await agentProcess(RUNAWAY, 'runaway-killed');
    await sixth.arrived;
    // The fifth report was awaited before the sixth call: durable by now.
    expect((await ledger()).length).toBe(5);
    first.child.kill('SIGKILL');
    await first.exited;
    const firstFence = (await task(dagId)).fence;
    await db.execute(sql`update tasks set lease_expires_at = now() - interval '1 second' where id = ${(await task(dagId)).id}`);
    expect(await reaper.runOnce()).toBe(1);
    await agentProcess(RUNAWAY, 'runaway-next');
    await eventually('the task completed', async () => (await task(dagId)).status === 'completed', 30_000);
    const rows = await ledger();
    expect(rows.filter((r) => r.fence === firstFence).length).toBe(5);
    expect(rows.filter((r) => r.fence !== firstFence).length).toBe(8);
    expect((await task(dagId)).cost_usd).toBeCloseTo(0.13);
    const attempts = await rowsOf<{ outcome: string; cost: number }>(db, sql`select outcome, cost_usd::float8 as cost from attempts order by fence`);
    // `lapsed` when it died before its first heartbeat (taken for a lost claim reply), else `failed` (crash): both keep its usage.
    expect(attempts.map((a) => a.outcome)).toEqual([expect.stringMatching(/^(lapsed|failed)$/), 'completed']);
    expect(attempts.map((a) => a.cost)).toEqual([0.05, 0.08]);
    const [dag] = await rowsOf<{ spent: number }>(db, sql`select spent_usd::float8 as spent from dags`);
    expect(dag!.spent).toBeCloseTo(0.13);
  });
});
