import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { agentCreate, dagCreate, leaseExpire, retryDue, rowsOf, taskStatusByKey } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { promoterCreate } from '../../src/maintenance/promoter.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

const database = await testDatabase();
const { db } = database;
const agentProcess = agentProcesses(database.url);

describe('a validation agent killed mid-step', () => {
  it('its validation task is recovered by the reaper and run again; the task completes exactly once', async () => {
    const dagId = await dagCreate(db, `
name: checked-build
tasks:
  build:
    type: code
    spec: { constraints: { capabilities: [write] } }
    output: { validation: { kind: test, command: "sleep 4; test -s \\"$DAGENT_OUTPUT_FILE\\"", timeout: 1m } }
  after: { type: t, depends_on: [build], spec: { constraints: { capabilities: [write] } } }
`);
    await agentCreate(db, 'writer', ['write']);
    const [build] = await taskClaim(db, 'writer');
    expect((await taskComplete(db, { taskId: build!.id, fence: build!.fence, output: { files: ['a.ts'] } })).settled?.status).toBe('validating');

    const victim = await agentProcess('agents/validate-test.ts', 'validator-victim');
    // Killed once it has said "received" (its first heartbeat, 2 s in): a crash mid-step, charged to the validation task.
    const vt = await eventually('validation task running on the victim, which has heartbeat', async () => (await rowsOf<{ id: string }>(db, sql`
      select id from tasks where validates_id = ${build!.id} and status = 'running' and claimed_by = 'validator-victim' and heartbeat_at > claimed_at`))[0]);
    victim.child.kill('SIGKILL');
    await victim.exited;

    // Its heartbeats stopped: once the lease runs out (moved into the past here) the reaper fails the validation task as a crash.
    await leaseExpire(db, vt.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    expect((await taskStatusByKey(db, dagId)).build).toBe('validating');
    await retryDue(db, vt.id);
    await promoterCreate({ db }).runOnce();
    await agentProcess('agents/validate-test.ts', 'validator-rescuer');
    await eventually('build completed', async () => (await taskStatusByKey(db, dagId)).build === 'completed');

    const validations = await rowsOf<{ agent_id: string; outcome: string; error_class: string | null }>(db, sql`
      select agent_id, outcome, error_class from attempts where task_id = ${vt.id} order by fence`);
    expect(validations).toEqual([
      { agent_id: 'validator-victim', outcome: 'failed', error_class: 'crash' },
      { agent_id: 'validator-rescuer', outcome: 'completed', error_class: null },
    ]);
    const builds = await rowsOf<{ agent_id: string; outcome: string }>(db, sql`select agent_id, outcome from attempts where task_id = ${build!.id}`);
    expect(builds).toEqual([{ agent_id: 'writer', outcome: 'completed' }]);
    const completions = await rowsOf<{ n: number }>(db, sql`
      select count(*)::int as n from tasks where id = ${build!.id} and status = 'completed' and attempts = 1`);
    expect(completions[0]!.n).toBe(1);
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ build: 'completed', after: 'ready' });
    const dag = (await dagGet(db, dagId))!;
    // build, after and the validation task: only after is still open.
    expect([dag.tasksTotal, dag.tasksOpen]).toEqual([3, 1]);
  });
});
