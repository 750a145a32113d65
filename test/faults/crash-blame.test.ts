import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// A task that killed its process took the others running there with it, and each counted a
// crash; after two agents, all of them were poison pills. Now only evidence is charged.
const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);
const reaper = reaperCreate({ db });

const TASKS = (name: string, tasks: string) => `name: ${name}\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n${tasks}`;

async function dies(id: string) {
  const agent = await agentProcess('test/fixtures/agents/bomber.ts', id);
  expect(await agent.exited).toBe(null); // killed by SIGKILL
  // Its heartbeats stopped: once the leases run out (moved into the past here), the reaper takes them back.
  await db.execute(sql`update tasks set lease_expires_at = now() - interval '1 second' where claimed_by = ${id} and status = 'running'`);
  expect(await reaper.runOnce()).toBe(3);
}

const history = async () => rowsOf<{ key: string; outcomes: string[]; attempts: number }>(db, sql`
  select t.key, array_agg(a.outcome || coalesce(':' || a.error_class, '') order by a.fence) as outcomes, t.attempts
  from tasks t join attempts a on a.task_id = t.id group by t.key, t.attempts order by t.key`);

describe('an agent process killed by one of the tasks it runs', () => {
  it('spares the innocent; the task common to two crashes in different company is charged', async () => {
    await dagCreate(db, TASKS('first', `  bomb: { type: bomb, priority: 0, spec: { constraints: { capabilities: [bomb] } } }
  i1: { type: work, priority: 10, spec: { constraints: { capabilities: [work] } } }
  i2: { type: work, priority: 10, spec: { constraints: { capabilities: [work] } } }
`));
    await dies('bomber-a');
    expect(await history()).toEqual([
      { key: 'bomb', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i1', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i2', outcomes: ['crash_shared'], attempts: 0 },
    ]);
    // New work more urgent than i1 and i2: the next agent runs the bomb with other company.
    await dagCreate(db, TASKS('second', `  i3: { type: work, priority: 5, spec: { constraints: { capabilities: [work] } } }
  i4: { type: work, priority: 5, spec: { constraints: { capabilities: [work] } } }
`));
    await dies('bomber-b');
    expect(await history()).toEqual([
      { key: 'bomb', outcomes: ['crash_shared', 'failed:crash'], attempts: 1 },
      { key: 'i1', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i2', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i3', outcomes: ['crash_shared'], attempts: 0 },
      { key: 'i4', outcomes: ['crash_shared'], attempts: 0 },
    ]);
    const [bomb] = await rowsOf<{ error_message: string; details: { crashWith: string[] } }>(db, sql`
      select a.error_message, a.details from attempts a join tasks t on t.id = a.task_id where t.key = 'bomb' and a.outcome = 'failed'`);
    expect(bomb!.error_message).toMatch(/only task common to this crash and an earlier one/);
    expect(bomb!.details.crashWith).toHaveLength(2);
  });
});
