import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { dagCancel } from '../../../src/engine/dag/cancel.js';
import { taskFail } from '../../../src/engine/attempt/fail.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { dagRerunFailed, taskRerun } from '../../../src/engine/dag/rerun.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { ConflictError, IllegalTransitionError } from '../../../src/errors.js';
import { cliWith } from '../../helpers/cli.js';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, chainYaml, dagCreate, databaseReset, databaseSnapshot, drain, rowsOf, taskStatusByKey } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });
beforeEach(() => databaseReset(db));

const idOf = async (dagId: string, key: string) => (await rowsOf<{ id: string }>(db, sql`select id from tasks where dag_id = ${dagId} and key = ${key}`))[0]!.id;

describe('re-running finished work', () => {
  it('a task and everything downstream run again as new work; the DAG runs on and its history keeps every run', async () => {
    const dagId = await dagCreate(db, chainYaml('chain', 3));
    await agentCreate(db, 'w');
    expect(await drain(db, 'w', (k) => ({ run: 1, k }))).toEqual(['t0', 't1', 't2']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');

    const r = await taskRerun(db, await idOf(dagId, 't1'), { downstream: true, note: 'the API changed' });
    expect(r.reopened.map((t) => [t.key, t.previous]).sort()).toEqual([['t1', 'completed'], ['t2', 'completed']]);
    expect(await taskStatusByKey(db, dagId)).toEqual({ t0: 'completed', t1: 'ready', t2: 'pending' });
    const dag = (await dagGet(db, dagId))!;
    expect([dag.status, dag.tasksOpen, dag.completedAt]).toEqual(['running', 2, null]);

    const [again] = await taskClaim(db, 'w');
    expect([again!.key, again!.attempt, again!.inputs]).toEqual(['t1', 1, {}]);
    await taskComplete(db, { taskId: again!.id, fence: again!.fence, output: { run: 2, k: 't1' } });
    expect(await drain(db, 'w', (k) => ({ run: 2, k }))).toEqual(['t2']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
    // The first run's output stays in the history, on its attempt; the task holds the second run's.
    const history = await rowsOf<{ outcome: string; output: unknown }>(db, sql`
      select outcome, details->'output' as output from attempts where task_id = ${again!.id} order by fence`);
    expect(history).toEqual([{ outcome: 'completed', output: { run: 1, k: 't1' } }, { outcome: 'completed', output: null }]);
    const [now] = await rowsOf<{ output: unknown }>(db, sql`select output from tasks where id = ${again!.id}`);
    expect(now!.output).toEqual({ run: 2, k: 't1' });
    const events = await rowsOf<{ type: string }>(db, sql`select type from events where dag_id = ${dagId} and type in ('task.rerun', 'dag.rerun') order by id`);
    expect(events.map((e) => e.type)).toEqual(['task.rerun', 'task.rerun', 'dag.rerun']);
  });

  it('without --downstream only the task runs again; a dependent that had not started waits for it again', async () => {
    const dagId = await dagCreate(db, chainYaml('pair', 2));
    await agentCreate(db, 'w');
    const [first] = await taskClaim(db, 'w');
    await taskComplete(db, { taskId: first!.id, fence: first!.fence, output: { v: 1 } });
    expect(await taskStatusByKey(db, dagId)).toEqual({ t0: 'completed', t1: 'ready' });
    await taskRerun(db, first!.id);
    expect(await taskStatusByKey(db, dagId)).toEqual({ t0: 'ready', t1: 'pending' });
    expect(await drain(db, 'w')).toEqual(['t0', 't1']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });

  it('refuses a task that is not finished, and --downstream while an agent holds a task below it; nothing changes', async () => {
    await dagCreate(db, chainYaml('busy', 2));
    await agentCreate(db, 'w');
    const [t0] = await taskClaim(db, 'w');
    await expect(taskRerun(db, t0!.id)).rejects.toBeInstanceOf(IllegalTransitionError);
    await taskComplete(db, { taskId: t0!.id, fence: t0!.fence, output: {} });
    await taskClaim(db, 'w'); // t1, now held
    const before = await databaseSnapshot(db);
    await expect(taskRerun(db, t0!.id, { downstream: true })).rejects.toBeInstanceOf(ConflictError);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('a DAG\'s dead-lettered and cancelled tasks run again: the dead letter is resolved, a blocked or cancelled DAG runs on', async () => {
    const dagId = await dagCreate(db, 'name: failing\ntasks:\n  a: { type: w, max_attempts: 1 }\n  b: { type: w, depends_on: [a] }\n');
    await agentCreate(db, 'w');
    const [a] = await taskClaim(db, 'w');
    await taskFail(db, { taskId: a!.id, fence: a!.fence, errorClass: 'provider', message: 'down' });
    expect((await dagGet(db, dagId))!.status).toBe('blocked');
    const r = await dagRerunFailed(db, dagId, { note: 'provider is back' });
    expect(r.reopened.map((t) => [t.key, t.previous])).toEqual([['a', 'dead_lettered']]);
    expect((await dagGet(db, dagId))!.status).toBe('running');
    const [dl] = await rowsOf<{ resolution: string }>(db, sql`select resolution from dead_letters where task_id = ${a!.id}`);
    expect(dl!.resolution).toBe('retried');

    await dagCancel(db, dagId);
    expect(await taskStatusByKey(db, dagId)).toEqual({ a: 'cancelled', b: 'cancelled' });
    await dagRerunFailed(db, dagId);
    expect(await taskStatusByKey(db, dagId)).toEqual({ a: 'ready', b: 'pending' });
    expect((await dagGet(db, dagId))!.status).toBe('running');
    expect(await drain(db, 'w')).toEqual(['a', 'b']);
    expect((await dagGet(db, dagId))!.status).toBe('completed');
  });

  it('dagent task rerun and dagent dag rerun --from-failed', async () => {
    const dagId = await dagCreate(db, chainYaml('cli', 2));
    await agentCreate(db, 'w');
    await drain(db, 'w');
    const r = await cli('task', 'rerun', await idOf(dagId, 't0'), '--downstream', '--json');
    expect(r.code).toBe(0);
    expect(r.json().reopened).toHaveLength(2);
    const none = await cli('dag', 'rerun', dagId, '--from-failed');
    expect([none.code, none.stderr]).toEqual([2, `error: DAG ${dagId} has no dead-lettered or cancelled task to run again\n`]);
    const missing = await cli('dag', 'rerun', dagId);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--from-failed/);
  });
});
