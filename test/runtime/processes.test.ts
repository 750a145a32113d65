import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, leaseExpire, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';
import { dagGet } from '../../src/db/queries/dags.js';

const database = await testDatabase();
const { db } = database;

const spawnAgent = agentProcesses(database.url);
/** An agent from test/fixtures/agents as a real process. */
const agentProcess = (file: string, id: string, extra: string[] = []) => spawnAgent(`test/fixtures/agents/${file}`, id, extra);

async function rows<T>(q: ReturnType<typeof sql>): Promise<T[]> {
  return (await db.execute(q)).rows as T[];
}

describe('agents as real processes', () => {
  it('two agent processes with different capabilities drain a DAG, each task on an agent that has its capabilities', async () => {
    const tasks = Array.from({ length: 8 }, (_, i) => `  t${i}: { type: t, spec: { constraints: { capabilities: [${i % 2 ? 'beta' : 'alpha'}] } }${i >= 2 ? `, depends_on: [t${i - 2}]` : ''} }`);
    const dagId = await dagCreate(db, `name: split\ntasks:\n${tasks.join('\n')}\n`);
    const a = await agentProcess('alpha.ts', 'proc-alpha');
    const b = await agentProcess('beta.ts', 'proc-beta');
    await eventually('DAG completed', async () => (await dagGet(db, dagId))?.status === 'completed');
    const ran = await rows<{ key: string; required: string[]; agent: string; capabilities: string[] }>(sql`
      select t.key, t.required_capabilities as required, t.claimed_by as agent, g.capabilities
      from tasks t join agents g on g.id = t.claimed_by where t.dag_id = ${dagId} order by t.key`);
    expect(ran).toHaveLength(8);
    for (const r of ran) expect(r.capabilities).toEqual(expect.arrayContaining(r.required));
    expect(new Set(ran.map((r) => r.agent))).toEqual(new Set(['proc-alpha', 'proc-beta']));
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    expect(await b.exited).toBe(0);
  });

  it('kill -9 mid-task: the reaper recovers the task, another agent completes it, nothing is completed twice', async () => {
    const dagId = await dagCreate(db, `
name: crash
tasks:
  long: { type: t, retry: { strategy: immediate }, spec: { constraints: { capabilities: [sleep] }, input: { ms: 60000 } } }
`);
    const a = await agentProcess('sleeper.ts', 'victim');
    // Killed once it has said "received" (its first heartbeat): a crash mid-task, charged to the task.
    await eventually('running on the victim, which has heartbeat', async () => (await rows<{ n: number }>(sql`
      select count(*)::int as n from tasks where dag_id = ${dagId} and status = 'running' and claimed_by = 'victim' and heartbeat_at > claimed_at`))[0]!.n === 1);
    a.child.kill('SIGKILL');
    await a.exited;
    const [task] = await rows<{ id: string }>(sql`select id from tasks where dag_id = ${dagId}`);
    // Its heartbeats stopped: once the lease runs out (here: moved into the past) the reaper takes the task back.
    await leaseExpire(db, task!.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    expect((await taskStatusByKey(db, dagId)).long).toBe('ready');
    await agentProcess('sleeper.ts', 'rescuer');
    await eventually('completed', async () => (await taskStatusByKey(db, dagId)).long === 'completed');
    const attempts = await rows<{ agent_id: string; outcome: string; error_class: string | null }>(sql`
      select agent_id, outcome, error_class from attempts where task_id = ${task!.id} order by fence`);
    expect(attempts).toEqual([
      { agent_id: 'victim', outcome: 'failed', error_class: 'crash' },
      { agent_id: 'rescuer', outcome: 'completed', error_class: null },
    ]);
    const [t] = await rows<{ output: { by: string } }>(sql`select output from tasks where id = ${task!.id}`);
    expect(t!.output.by).toBe('rescuer');
  });

  it('SIGTERM mid-task: the running task finishes within the grace period and the process exits 0', async () => {
    const dagId = await dagCreate(db, 'name: finish\ntasks:\n  job: { type: t, spec: { constraints: { capabilities: [sleep] }, input: { ms: 1500 } } }\n');
    const a = await agentProcess('sleeper.ts', 'graceful');
    await eventually('running', async () => (await taskStatusByKey(db, dagId)).job === 'running');
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    expect(await taskStatusByKey(db, dagId)).toEqual({ job: 'completed' });
    const attempts = await rows<{ outcome: string }>(sql`select outcome from attempts where dag_id = ${dagId}`);
    expect(attempts).toEqual([{ outcome: 'completed' }]);
    const [agent] = await rows<{ status: string }>(sql`select status from agents where id = 'graceful'`);
    expect(agent!.status).toBe('offline');
  });

  it('SIGTERM past the grace period: the task is released to READY without losing an attempt, exit 0', async () => {
    const dagId = await dagCreate(db, 'name: release\ntasks:\n  job: { type: t, spec: { constraints: { capabilities: [sleep] }, input: { ms: 60000 } } }\n');
    const a = await agentProcess('sleeper.ts', 'impatient', ['--grace-sec', '1']);
    await eventually('running', async () => (await taskStatusByKey(db, dagId)).job === 'running');
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    const [t] = await rows<{ status: string; attempts: number }>(sql`select status, attempts from tasks where dag_id = ${dagId}`);
    expect(t).toEqual({ status: 'ready', attempts: 0 });
    expect(await rows(sql`select outcome from attempts where dag_id = ${dagId}`)).toEqual([{ outcome: 'released' }]);
  });
});
