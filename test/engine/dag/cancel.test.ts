import { describe, expect, it } from 'vitest';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { dagCancel, taskCancel } from '../../../src/engine/dag/cancel.js';
import { dagEdgesAdd } from '../../../src/engine/dag/edges.js';
import { agentBeat } from '../../../src/engine/ops/agents.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskStart } from '../../../src/engine/attempt/lease.js';
import { attemptListForTask } from '../../../src/db/queries/attempts.js';
import { agentGet } from '../../../src/db/queries/agents.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { eventListForDag } from '../../../src/db/queries/events.js';
import { reaperCreate } from '../../../src/maintenance/reaper.js';
import { InvalidInputError, LeaseLostError } from '../../../src/errors.js';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, taskStatusByKey } from '../../helpers/factories.js';

const { db } = await testDatabase();

describe('cancel', () => {
  it('cancelling a task held by an agent records the cut-short attempt and refuses the agent\'s completion', async () => {
    const dagId = await dagCreate(db, 'name: held\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n  c: { type: t }\n');
    const agentId = await agentCreate(db, 'cancel-a');
    const claimed = await taskClaim(db, agentId, { limit: 2, dagId });
    const a = claimed.find((t) => t.key === 'a')!;
    await taskStart(db, { taskId: a.id, fence: a.fence });
    const cancelled = await taskCancel(db, a.id, 'tester', 'wrong approach');
    expect(cancelled.map((c) => [c.key, c.previous])).toEqual(expect.arrayContaining([['a', 'running'], ['b', 'pending']]));
    expect(await taskStatusByKey(db, dagId)).toMatchObject({ a: 'cancelled', b: 'cancelled', c: 'claimed' });
    await expect(taskComplete(db, { taskId: a.id, fence: a.fence, output: 1 })).rejects.toBeInstanceOf(LeaseLostError);
    expect((await attemptListForTask(db, a.id)).map((x) => [x.agentId, x.outcome])).toEqual([[agentId, 'cancelled']]);

    const c = claimed.find((t) => t.key === 'c')!;
    await taskComplete(db, { taskId: c.id, fence: c.fence, output: 1 });
    expect((await dagGet(db, dagId))?.status).toBe('completed');
    expect((await eventListForDag(db, dagId)).map((e) => e.type)).toContain('dag.completed');
  });

  it('a DAG cancel cancels every unfinished task; a finished DAG cannot be cancelled', async () => {
    const dagId = await dagCreate(db, 'name: whole\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    const cancelled = await dagCancel(db, dagId, 'tester');
    expect(cancelled).toHaveLength(2);
    expect((await dagGet(db, dagId))?.status).toBe('cancelled');
    await expect(dagCancel(db, dagId)).rejects.toThrow(/is cancelled: only running or blocked DAGs can be cancelled/);
  });

  it('refuses an edge from a cancelled upstream, which would block its downstream forever', async () => {
    const dagId = await dagCreate(db, 'name: dead-edge\ntasks:\n  a: { type: t }\n  b: { type: t }\n');
    const ids = await db.execute<{ id: string; key: string }>(sql`select id, key from tasks where dag_id = ${dagId}`);
    await taskCancel(db, ids.rows.find((r) => r.key === 'a')!.id);
    await expect(dagEdgesAdd(db, dagId, [{ upstream: 'a', downstream: 'b' }])).rejects.toBeInstanceOf(InvalidInputError);
    expect((await taskStatusByKey(db, dagId)).b).toBe('ready');
  });
});

describe('agent liveness', () => {
  it('an agent marked offline for silence becomes active again on its next heartbeat', async () => {
    const agentId = await agentCreate(db, 'sleepy');
    await db.execute(sql`update agents set heartbeat_at = now() - interval '1 hour' where id = ${agentId}`);
    await reaperCreate({ db }).runOnce();
    expect((await agentGet(db, agentId))?.status).toBe('offline');
    await agentBeat(db, agentId);
    expect((await agentGet(db, agentId))?.status).toBe('active');
  });
});
