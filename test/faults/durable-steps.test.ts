import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, databaseReset, rowsOf, leaseLapsedReaped } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { paidApiStart } from '../helpers/paid-api.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// Durable steps against real agent processes: a process killed with SIGKILL between two steps, and one stopped
// (SIGSTOP) past its lease, never make a paid call twice for a step that was recorded, and a stale process's late
// write records nothing.
const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);
const reaper = reaperCreate({ db });

const paidApi = await paidApiStart();
// The agent processes inherit this environment; the stepper fixture reads the paid API's address from it.
process.env.DAGENT_TEST_PAID_API = paidApi.url;

/** The holder's lease, moved into the past, and the reaper takes the task back (immediate retry: READY again). */
const reaped = (agentId: string) => leaseLapsedReaped(db, reaper, agentId);

const DAG = (input: string) => `name: paid\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:
  t: { type: paid, spec: { constraints: { capabilities: [paid] }, input: ${input} } }\n`;
const task = async (dagId: string) => (await rowsOf<{ id: string; status: string; output: { results: unknown[] } | null; fence: number; claimed_by: string | null }>(db, sql`
  select id, status, output, fence, claimed_by from tasks where dag_id = ${dagId}`))[0]!;
const answers = [1, 2, 3, 4, 5].map((i) => ({ answer: `/call/${i}` }));

beforeEach(async () => {
  await databaseReset(db);
  paidApi.reset();
});

describe('durable steps across real agent processes', () => {
  it('an agent SIGKILLed after its third recorded step: the next process replays three and makes two calls, five paid calls in all, one per step', async () => {
    const checkpoint = paidApi.hold('/checkpoint/3');
    const dagId = await dagCreate(db, DAG('{ calls: 5, checkpointAfter: 3 }'));
    const first = await agentProcess('test/fixtures/agents/stepper.ts', 'stepper-a');
    await checkpoint.arrived;
    // Step 3 is recorded (ctx.step returned) and call 4 is not yet sent.
    expect(paidApi.calls.map((c) => c.path)).toEqual(['/call/1', '/call/2', '/call/3']);
    const firstFence = (await task(dagId)).fence;
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe(null);
    await reaped('stepper-a');

    await agentProcess('test/fixtures/agents/stepper.ts', 'stepper-b');
    await eventually('the task completed', async () => (await task(dagId)).status === 'completed', 30_000);
    expect(paidApi.calls).toEqual([
      ...['/call/1', '/call/2', '/call/3'].map((path) => ({ path, agent: 'stepper-a' })),
      ...['/call/4', '/call/5'].map((path) => ({ path, agent: 'stepper-b' })),
    ]);
    expect((await task(dagId)).output).toEqual({ results: answers });
    const steps = await rowsOf<{ name: string; fence: number; cost_usd: number }>(db, sql`select name, fence, cost_usd::float8 as cost_usd from task_steps order by name`);
    expect(steps.map((s) => [s.name, s.fence === firstFence ? 'a' : 'b', s.cost_usd])).toEqual([
      ['call 1', 'a', 0.01], ['call 2', 'a', 0.01], ['call 3', 'a', 0.01], ['call 4', 'b', 0.01], ['call 5', 'b', 0.01],
    ]);
    // The second attempt paid for two calls and replayed three.
    const [replayed] = await rowsOf<{ n: number; r: number }>(db, sql`
      select count(*)::int as n, sum(cost_usd)::float8 as r from task_step_replays where fence <> ${firstFence}`);
    expect(replayed).toEqual({ n: 3, r: 0.03 });
    const [completed] = await rowsOf<{ cost: number }>(db, sql`select cost_usd::float8 as cost from attempts where outcome = 'completed'`);
    expect(completed!.cost).toBeCloseTo(0.02);
  });

  it('an agent SIGSTOPped past its lease: after SIGCONT its late step write is refused and nothing is recorded under its fence', async () => {
    const late = paidApi.hold('/call/1');
    const dagId = await dagCreate(db, DAG('{ calls: 2 }'));
    const stopped = await agentProcess('test/fixtures/agents/stepper.ts', 'stepper-stopped');
    await late.arrived;
    const staleFence = (await task(dagId)).fence;
    stopped.child.kill('SIGSTOP');
    try {
      await reaped('stepper-stopped');
      const other = await agentProcess('test/fixtures/agents/stepper.ts', 'stepper-other');
      await eventually('the task completed elsewhere', async () => (await task(dagId)).status === 'completed', 30_000);
      other.child.kill('SIGKILL');
      // The stopped process's call gets its answer, and it resumes: its step write comes under a stale fence.
      late.answer();
    } finally {
      stopped.child.kill('SIGCONT');
    }
    await eventually('the stale write was refused', async () => stopped.output().includes('step refused: the lease was lost'));
    const steps = await rowsOf<{ name: string; fence: number }>(db, sql`select name, fence from task_steps order by name`);
    expect(steps.map((s) => s.name)).toEqual(['call 1', 'call 2']);
    expect(steps.filter((s) => s.fence === staleFence)).toEqual([]);
    expect((await task(dagId)).output).toEqual({ results: answers.slice(0, 2) });
  });
});
