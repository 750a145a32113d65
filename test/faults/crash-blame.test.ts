import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// A task that killed its process took the others running there with it, and each counted a
// crash; after two agents, all of them were poison pills. Then only evidence was charged, but
// tasks that always ran together were all charged after three shared crashes. Now a task spared
// after a shared crash runs alone, so the next crash names its cause.
const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);
const reaper = reaperCreate({ db });
beforeEach(() => databaseReset(db));

const TASKS = (name: string, tasks: string) => `name: ${name}\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n${tasks}`;

/** The agent process dies (SIGKILL from its bomb); once its leases run out (moved into the past here), the reaper takes back what it held. */
async function reaped(id: string, agent: { exited: Promise<number | null> }): Promise<number> {
  expect(await agent.exited).toBe(null); // killed by SIGKILL
  await db.execute(sql`update tasks set lease_expires_at = now() - interval '1 second' where claimed_by = ${id} and status = 'running'`);
  return reaper.runOnce();
}

async function dies(id: string, holding: number) {
  expect(await reaped(id, await agentProcess('test/fixtures/agents/bomber.ts', id))).toBe(holding);
}

const history = async () => rowsOf<{ key: string; outcomes: string[]; attempts: number }>(db, sql`
  select t.key, array_agg(a.outcome || coalesce(':' || a.error_class, '') order by a.fence) as outcomes, t.attempts
  from tasks t join attempts a on a.task_id = t.id group by t.key, t.attempts order by t.key`);

describe('an agent process killed by one of the tasks it runs', () => {
  it('spares the innocent, then runs the bomb alone: the crash it causes alone is charged to it, and the work beside it is untouched', async () => {
    await dagCreate(db, TASKS('first', `  bomb: { type: bomb, priority: 0, spec: { constraints: { capabilities: [bomb] } } }
  i1: { type: work, priority: 10, spec: { constraints: { capabilities: [work] } } }
  i2: { type: work, priority: 10, spec: { constraints: { capabilities: [work] } } }
`));
    await dies('bomber-a', 3);
    expect(await history()).toEqual([
      { key: 'bomb', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i1', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i2', outcomes: ['crash_shared'], attempts: 0 },
    ]);
    const alone = await rowsOf<{ key: string }>(db, sql`select key from tasks where run_alone order by key`);
    expect(alone.map((r) => r.key)).toEqual(['bomb', 'i1', 'i2']);
    // New work more urgent than i1 and i2: the next agent takes the bomb, and nothing beside it.
    await dagCreate(db, TASKS('second', `  i3: { type: work, priority: 5, spec: { constraints: { capabilities: [work] } } }
  i4: { type: work, priority: 5, spec: { constraints: { capabilities: [work] } } }
`));
    await dies('bomber-b', 1);
    expect(await history()).toEqual([
      { key: 'bomb', outcomes: ['crash_shared', 'failed:crash'], attempts: 1 },
      { key: 'i1', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i2', outcomes: ['crash_shared'], attempts: 0 },
    ]);
    const [bomb] = await rowsOf<{ error_message: string }>(db, sql`
      select a.error_message from attempts a join tasks t on t.id = a.task_id where t.key = 'bomb' and a.outcome = 'failed'`);
    expect(bomb!.error_message).toMatch(/only task its agent was running/);
  });

  it('one poison task among three innocent ones in one process: the innocent complete, the poison alone is dead-lettered, in a bounded number of crashes', async () => {
    await dagCreate(db, TASKS('poisoned', `  bomb: { type: bomb, spec: { constraints: { capabilities: [bomb] } } }
  i1: { type: work, spec: { constraints: { capabilities: [work] } } }
  i2: { type: work, spec: { constraints: { capabilities: [work] } } }
  i3: { type: work, spec: { constraints: { capabilities: [work] } } }
`));
    const states = async () => new Map((await rowsOf<{ key: string; status: string }>(db, sql`select key, status from tasks`)).map((r) => [r.key, r.status]));
    const settled = async () => {
      const s = await states();
      return s.get('bomb') === 'dead_lettered' && ['i1', 'i2', 'i3'].every((k) => s.get(k) === 'completed');
    };
    // Each agent process works until the poison kills it; a process it does not kill works on. At most one shared
    // crash, then one crash per attempt of the poison (max_attempts 3): four.
    let crashes = 0;
    for (let round = 0; round < 6 && !(await settled()); round++) {
      const id = `poison-${round}`;
      const agent = await agentProcess('test/fixtures/agents/poison.ts', id);
      const died = await Promise.race([agent.exited.then(() => true), eventually('the DAG settled', settled, 30_000).then(() => false)]);
      if (!died) break;
      crashes++;
      await reaped(id, agent);
    }
    expect(await settled()).toBe(true);
    expect(crashes).toBeLessThanOrEqual(4);
    const h = await history();
    expect(h.find((r) => r.key === 'bomb')).toEqual({ key: 'bomb', outcomes: ['crash_shared', 'failed:crash', 'failed:crash', 'failed:crash'], attempts: 3 });
    for (const k of ['i1', 'i2', 'i3']) {
      const r = h.find((x) => x.key === k)!;
      expect(r.outcomes.at(-1)).toBe('completed');
      expect(r.outcomes.filter((o) => o.startsWith('failed'))).toEqual([]);
    }
  });
});
