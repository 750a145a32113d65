import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../../helpers/db.js';
import { agentCreate, dagCreate, dagSpec, rowsOf, taskStatusByKey } from '../../helpers/factories.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { effectivePriority } from '../../../src/model/priority.js';
import { taskClaim } from '../../../src/engine/attempt/claim.js';
import { taskComplete } from '../../../src/engine/attempt/complete.js';
import { taskHeartbeat, taskStart } from '../../../src/engine/attempt/lease.js';
import { dagGet } from '../../../src/db/queries/dags.js';
import { taskShow } from '../../../src/engine/read/inspect.js';
import { LeaseLostError, IllegalTransitionError } from '../../../src/errors.js';
import { promoterCreate } from '../../../src/maintenance/promoter.js';

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
    const shown = await taskShow(db, d!.id);
    expect(shown.inputs).toEqual({ b: 'B', 'c.value': 'C' });
    expect(shown.attempts.map((x) => x.outcome)).toEqual(['completed']);
  });

  it('resolves relative deadline and not_before by the database clock; not_before holds the task until the promoter', async () => {
    const dagId = await dagCreate(db, 'name: later\ntasks:\n  x: { type: t, deadline: 2h, not_before: 1h }\n  y: { type: t, deadline: "2030-01-01T00:00:00+02:00" }\n');
    const { rows } = await db.execute<{ key: string; status: string; deadline_in: number; run_in: number | null; deadline: string }>(sql`
      select key, status, extract(epoch from deadline - created_at)::float8 as deadline_in,
             extract(epoch from run_at - created_at)::float8 as run_in, to_json(deadline)#>>'{}' as deadline
      from tasks where dag_id = ${dagId} order by key`);
    expect(rows[0]).toMatchObject({ key: 'x', status: 'pending' });
    expect(rows[0]!.deadline_in).toBeCloseTo(7200, 0);
    expect(rows[0]!.run_in).toBeCloseTo(3600, 0);
    expect(rows[1]).toMatchObject({ key: 'y', status: 'ready' });
    expect(new Date(rows[1]!.deadline).toISOString()).toBe('2029-12-31T22:00:00.000Z');

    const promoter = promoterCreate({ db });
    expect(await promoter.runOnce()).toBe(0);
    await db.execute(sql`update tasks set run_at = now() where dag_id = ${dagId} and key = 'x'`);
    expect(await promoter.runOnce()).toBe(1);
    expect((await taskStatusByKey(db, dagId)).x).toBe('ready');
  });

  it('inserts a DAG larger than one statement takes (12,000 tasks) whole, each task in the state it starts in', async () => {
    const pair = await dagSpec('name: big\ntasks:\n  root: { type: t, priority: 40, deadline: 1h }\n  leaf: { type: t, depends_on: [root], not_before: 2h }\n');
    const [root, leaf] = pair.tasks;
    const tasks = Array.from({ length: 6000 }, (_, i) => [
      { ...root!, key: `r${i}` }, { ...leaf!, key: `l${i}`, dependsOn: [`r${i}`] },
    ]).flat();
    const [r] = await dagSubmit(db, [{ ...pair, tasks }]);
    const rows = await rowsOf<{ status: string; n: number; with_ready_at: number; deadline_in: number; run_in: number | null; p: number; rank: number }>(db, sql`
      select status, count(*)::int as n, count(ready_at)::int as with_ready_at,
        avg(extract(epoch from deadline - created_at))::float8 as deadline_in, avg(extract(epoch from run_at - created_at))::float8 as run_in,
        min(effective_priority) as p, min(cp_rank_sec) as rank
      from tasks where dag_id = ${r!.dagId} group by status order by status`);
    expect(rows.map((x) => [x.status, x.n, x.with_ready_at])).toEqual([['pending', 6000, 0], ['ready', 6000, 6000]]);
    const [pending, ready] = rows;
    expect(ready!.deadline_in).toBeCloseTo(3600, 0);
    expect(pending!.run_in).toBeCloseTo(7200, 0);
    // The effective priority the claim orders by, as the formula gives it for a task that just became READY.
    expect(ready!.p).toBeCloseTo(effectivePriority({ priority: 40, boostPerMinute: 0, readySec: 0, deadlineInSec: 3600, cpRankSec: ready!.rank }), 1);
    expect(await rowsOf(db, sql`select 1 from edges where dag_id = ${r!.dagId}`)).toHaveLength(6000);
  });

  it('refuses a stale fencing token and an illegal transition with typed errors', async () => {
    const dagId = await dagCreate(db, 'name: one\ntasks:\n  x: { type: t }\n');
    await agentCreate(db, 'lc-2');
    const [x] = await taskClaim(db, 'lc-2', { dagId });
    await expect(taskComplete(db, { taskId: x!.id, fence: x!.fence + 1, output: 1 })).rejects.toBeInstanceOf(LeaseLostError);
    await taskStart(db, { taskId: x!.id, fence: x!.fence });
    await expect(taskStart(db, { taskId: x!.id, fence: x!.fence })).rejects.toBeInstanceOf(IllegalTransitionError);
    await taskComplete(db, { taskId: x!.id, fence: x!.fence, output: 1 });
    // The same attempt reporting another result: a 409 (CONFLICT), and the first result stands.
    await expect(taskComplete(db, { taskId: x!.id, fence: x!.fence, output: 2 })).rejects.toThrow(/already reported a different output/);
    const { rows } = await db.execute(sql`select output from tasks where dag_id = ${dagId}`);
    expect(rows[0]).toEqual({ output: 1 });
  });

  it('leases for three of the task\'s heartbeat_sec when the caller names no lease', async () => {
    const dagId = await dagCreate(db, 'name: beat\ntasks:\n  slow: { type: t, spec: { constraints: { heartbeat_sec: 100 } } }\n  plain: { type: t }\n');
    await agentCreate(db, 'lease-1');
    const claimed = await taskClaim(db, 'lease-1', { limit: 2, dagId });
    const leaseOf = async (key: string) => {
      const t = claimed.find((x) => x.key === key)!;
      const until = await taskStart(db, { taskId: t.id, fence: t.fence });
      return (until.getTime() - Date.now()) / 1000;
    };
    const slow = await leaseOf('slow');
    expect(slow).toBeGreaterThan(290);
    expect(slow).toBeLessThan(310);
    const plain = await leaseOf('plain');
    expect(plain).toBeGreaterThan(50);
    expect(plain).toBeLessThan(70);
  });
});

