import { beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, databaseReset, rowsOf } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { stepRecord, stepsList } from '../../src/engine/attempt/steps.js';
import { taskRerun } from '../../src/engine/dag/rerun.js';
import { taskGet } from '../../src/db/queries/tasks-read.js';

// A re-run does the work again: it starts without the task's durable steps; --from-step keeps those recorded before
// the named one (the re-run replays them) and deletes that one and those after it.
const database = await testDatabase();
const { db } = database;
beforeEach(() => databaseReset(db));

/** A completed task that recorded steps s1, s2, s3 (task scope) and a1 (attempt scope) in that order. */
async function completedWithSteps() {
  await agentCreate(db, 'a1', ['steps']);
  await dagCreate(db, 'name: rerun-steps\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [steps] } } }\n  after: { type: t, depends_on: [t], spec: { constraints: { capabilities: [steps] } } }\n');
  const [t] = await taskClaim(db, 'a1', { start: true });
  for (const name of ['s1', 's2', 's3']) await stepRecord(db, { taskId: t!.id, fence: t!.fence, name, result: name });
  await stepRecord(db, { taskId: t!.id, fence: t!.fence, name: 'a1', scope: 'attempt', result: 'a' });
  await taskComplete(db, { taskId: t!.id, fence: t!.fence, output: { done: true } });
  return t!;
}
const names = async (taskId: string) => (await stepsList(db, taskId)).map((s) => s.name);

describe('re-running a task that recorded durable steps', () => {
  it('starts without them, and says how many went', async () => {
    const t = await completedWithSteps();
    const r = await taskRerun(db, t.id, { note: 'again' });
    expect(r).toMatchObject({ reopened: [{ id: t.id, previous: 'completed' }], stepsDropped: 4 });
    expect(await names(t.id)).toEqual([]);
    const [event] = await rowsOf<{ data: { stepsDropped: number } }>(db, sql`select data from events where type = 'dag.rerun'`);
    expect(event!.data.stepsDropped).toBe(4);
  });

  it('--from-step keeps the steps recorded before the one named and deletes it and those after it', async () => {
    const t = await completedWithSteps();
    const r = await taskRerun(db, t.id, { fromStep: 's2' });
    expect(r.stepsDropped).toBe(3);
    expect(await names(t.id)).toEqual(['s1']);
    expect((await taskGet(db, t.id))!.status).not.toBe('completed');
  });

  it('--from-step naming no step the task recorded (or an attempt-scoped one) is a 400 and changes nothing', async () => {
    const t = await completedWithSteps();
    for (const fromStep of ['nope', 'a1']) {
      await expect(taskRerun(db, t.id, { fromStep })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: new RegExp(`no step named "${fromStep}"`) });
    }
    expect(await names(t.id)).toEqual(['s1', 's2', 's3', 'a1']);
    expect((await taskGet(db, t.id))!.status).toBe('completed');
  });

  it('with --downstream, the tasks after it lose all their steps while --from-step trims only the one named', async () => {
    const t = await completedWithSteps();
    const [after] = await taskClaim(db, 'a1', { start: true });
    await stepRecord(db, { taskId: after!.id, fence: after!.fence, name: 'x', result: 1 });
    await taskComplete(db, { taskId: after!.id, fence: after!.fence, output: 1 });
    const r = await taskRerun(db, t.id, { downstream: true, fromStep: 's3' });
    expect(r.reopened).toHaveLength(2);
    expect(r.stepsDropped).toBe(3);
    expect([await names(t.id), await names(after!.id)]).toEqual([['s1', 's2'], []]);
  });
});
