import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, drain, taskStatusByKey } from '../helpers/factories.js';
import { depsReconcilerCreate } from '../../src/maintenance/deps-reconciler.js';

const { db } = await testDatabase();

describe('deps reconciler', () => {
  it('recounts a dependent whose counter drifted, so it runs once its upstream work is done; correct counters are left alone', async () => {
    const dagId = await dagCreate(db, 'name: drift\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n  c: { type: t, depends_on: [a] }\n  d: { type: t, depends_on: [c] }\n');
    // b's counter one too high, as a process dying between an edge insert and its recount would leave it.
    await db.execute(sql`update tasks set deps_remaining = 2 where dag_id = ${dagId} and key = 'b'`);
    await drain(db, await agentCreate(db, 'drift-1'));
    expect(await taskStatusByKey(db, dagId)).toEqual({ a: 'completed', b: 'pending', c: 'completed', d: 'completed' });
    const reconciler = depsReconcilerCreate({ db, quietSec: 0 });
    expect(await reconciler.runOnce()).toBe(1);
    expect((await taskStatusByKey(db, dagId)).b).toBe('ready');
    expect(await reconciler.runOnce()).toBe(0);
    const { rows } = await db.execute<{ n: number }>(sql`select count(*)::int as n from events where type = 'task.deps_repaired'`);
    expect(rows[0]!.n).toBe(1);
  });

  it('leaves recently changed tasks for a later pass', async () => {
    const dagId = await dagCreate(db, 'name: fresh\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n');
    await db.execute(sql`update tasks set deps_remaining = 5, updated_at = now() where dag_id = ${dagId} and key = 'b'`);
    expect(await depsReconcilerCreate({ db, quietSec: 3600 }).runOnce()).toBe(0);
  });
});
