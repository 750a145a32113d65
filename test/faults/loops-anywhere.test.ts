import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';

// Retries never happened without `dagent up`: the promoter, reaper and the other loops ran only
// there, so with `dagent agent run` alone a failed task stayed `retrying` for ever. Now every
// dagent process runs them, and the cadence gate lets one process per loop and interval do each duty.
const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);

const DAG = (name: string, n: number) => [`name: ${name}`, 'tasks:',
  ...Array.from({ length: n }, (_, i) => `  t${i}: { type: t, max_attempts: 2, retry: { strategy: fixed, initial_delay: 1s, jitter: 0 }, spec: { constraints: { capabilities: [flaky] } } }`)].join('\n');

const attemptsByTask = (dagId: string) => rowsOf<{ key: string; outcomes: string[] }>(db, sql`
  select t.key, array_agg(a.outcome order by a.fence) as outcomes from tasks t join attempts a on a.task_id = t.id
  where t.dag_id = ${dagId} group by t.key order by t.key`);

describe('the maintenance loops run wherever dagent runs', () => {
  it('with `dagent agent run` alone, a failed task is retried after its delay and completes', async () => {
    const agent = await agentProcess('test/fixtures/agents/flaky.ts', 'flaky-alone', [], { maintenance: true });
    expect(agent.output()).toMatch(/and the maintenance loops \(reaper, promoter, .*\)/);
    const dagId = await dagCreate(db, DAG('alone', 1));
    await eventually('completed after a retry', async () => (await rowsOf<{ status: string }>(db, sql`select status from tasks where dag_id = ${dagId}`))[0]!.status === 'completed', 20_000);
    expect(await attemptsByTask(dagId)).toEqual([{ key: 't0', outcomes: ['failed', 'completed'] }]);
    // Stopped, it gives its loops' leases up (killed, it would keep them for a lease, 15 s, and the next test's
    // processes would wait that long for the promoter).
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
    expect(await rowsOf(db, sql`select name from maintenance_leases`)).toEqual([]);
  });

  it('with three agent processes running the loops, 30 tasks each fail once, are promoted once and complete once', async () => {
    await Promise.all(['flaky-1', 'flaky-2', 'flaky-3'].map((id) => agentProcess('test/fixtures/agents/flaky.ts', id, [], { maintenance: true })));
    const dagId = await dagCreate(db, DAG('three', 30));
    await eventually('all completed', async () => (await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from tasks where dag_id = ${dagId} and status = 'completed'`))[0]!.n === 30, 30_000);
    const rows = await attemptsByTask(dagId);
    expect(rows).toHaveLength(30);
    for (const r of rows) expect(r.outcomes, r.key).toEqual(['failed', 'completed']);
    const [promotions] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from events where dag_id = ${dagId} and type = 'task.retry_scheduled'`);
    expect(promotions!.n).toBe(30);
  });
});
