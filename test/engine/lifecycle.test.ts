import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, taskStatusByKey } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/claim.js';
import { taskComplete, taskHeartbeat, taskStart } from '../../src/engine/lifecycle.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { LeaseLostError, IllegalTransitionError } from '../../src/errors.js';

const { db } = await testDatabase();

const DIAMOND = `
name: diamond
tasks:
  a: { type: t }
  b: { type: t, depends_on: [a], spec: { context: [a] } }
  c: { type: t, depends_on: [a] }
  d: { type: t, depends_on: [b, c], spec: { context: [b, c.value] } }
`;

describe('task lifecycle', () => {
  it('moves dependents to READY only when their last upstream completes, and completes the DAG', async () => {
    const dagId = await dagCreate(db, DIAMOND);
    await agentCreate(db, 'lc-1');
    expect(await taskStatusByKey(db, dagId)).toEqual({ a: 'ready', b: 'pending', c: 'pending', d: 'pending' });

    const [a] = await taskClaim(db, 'lc-1');
    expect(a!.key).toBe('a');
    expect(await taskClaim(db, 'lc-1')).toEqual([]);
    await taskStart(db, { taskId: a!.id, fence: a!.fence });
    await taskHeartbeat(db, { taskId: a!.id, fence: a!.fence, progress: 0.5, message: 'half' });
    const r = await taskComplete(db, { taskId: a!.id, fence: a!.fence, output: { value: 1 } });
    expect(r.unblocked).toBe(2);
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ a: 'completed', b: 'ready', c: 'ready', d: 'pending' });

    const bc = await taskClaim(db, 'lc-1', { limit: 5 });
    expect(bc.map((t) => t.key).sort()).toEqual(['b', 'c']);
    const b = bc.find((t) => t.key === 'b')!;
    expect(b.inputs).toEqual({ a: { value: 1 } });
    await taskComplete(db, { taskId: b.id, fence: b.fence, output: 'B' });
    expect((await taskStatusByKey(db, dagId)).d).toBe('pending');
    const c = bc.find((t) => t.key === 'c')!;
    await taskComplete(db, { taskId: c.id, fence: c.fence, output: { value: 'C' } });

    const [d] = await taskClaim(db, 'lc-1');
    expect(d!.inputs).toEqual({ b: 'B', 'c.value': 'C' });
    const done = await taskComplete(db, { taskId: d!.id, fence: d!.fence, output: null, costUsd: 0.25 });
    expect(done.dagsCompleted).toEqual([dagId]);
    const dag = await dagGet(db, dagId);
    expect(dag).toMatchObject({ status: 'completed', tasksOpen: 0, spentUsd: 0.25 });
  });

  it('refuses a stale fencing token and an illegal transition with typed errors', async () => {
    const dagId = await dagCreate(db, 'name: one\ntasks:\n  x: { type: t }\n');
    await agentCreate(db, 'lc-2');
    const [x] = await taskClaim(db, 'lc-2');
    await expect(taskComplete(db, { taskId: x!.id, fence: x!.fence + 1, output: 1 })).rejects.toBeInstanceOf(LeaseLostError);
    await taskStart(db, { taskId: x!.id, fence: x!.fence });
    await expect(taskStart(db, { taskId: x!.id, fence: x!.fence })).rejects.toBeInstanceOf(IllegalTransitionError);
    await taskComplete(db, { taskId: x!.id, fence: x!.fence, output: 1 });
    await expect(taskComplete(db, { taskId: x!.id, fence: x!.fence, output: 2 })).rejects.toBeInstanceOf(LeaseLostError);
    const { rows } = await db.execute(sql`select output from tasks where dag_id = ${dagId}`);
    expect(rows[0]).toEqual({ output: 1 });
  });
});
