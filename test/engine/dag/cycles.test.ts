import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { databaseOpen } from '../../../src/db/open.js';
import { dagEdgesAdd } from '../../../src/engine/dag/edges.js';
import { dagSubmit } from '../../../src/engine/dag/submit.js';
import { CycleError } from '../../../src/errors.js';
import { edgeInsertMany, edgeListForDag } from '../../../src/db/queries/edges.js';
import { dagGraphBuild, cycleFind } from '../../../src/dag/graph.js';
import { testDatabase } from '../../helpers/db.js';
import { dagCreate, dagSpec, databaseSnapshot, taskStatusByKey } from '../../helpers/factories.js';

const database = await testDatabase();
const { db } = database;

describe('cycle detection at edge insertion', () => {
  it('refuses a cyclic DAG at creation with the path, writing nothing', async () => {
    const spec = await dagSpec('name: ok\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n  c: { type: t, depends_on: [b] }\n');
    // Bypass the file checks, as a program building specs by hand would.
    spec.tasks[0]!.dependsOn = ['c'];
    const before = await databaseSnapshot(db);
    const err = await dagSubmit(db, [spec]).catch((e) => e);
    expect(err).toBeInstanceOf(CycleError);
    expect(err.message).toContain('a -> b -> c -> a');
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('refuses an edge added later that would close a cycle, and accepts a safe one', async () => {
    const dagId = await dagCreate(db, 'name: later\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n  c: { type: t, depends_on: [b] }\n  d: { type: t }\n');
    const err = await dagEdgesAdd(db, dagId, [{ upstream: 'c', downstream: 'a' }]).catch((e) => e);
    expect(err).toBeInstanceOf(CycleError);
    expect(err.cycle).toEqual(['a', 'b', 'c', 'a']);

    await dagEdgesAdd(db, dagId, [{ upstream: 'd', downstream: 'c' }]);
    expect((await taskStatusByKey(db, dagId)).c).toBe('pending');
    const { rows } = await db.execute<{ deps_remaining: number }>(sql`select deps_remaining from tasks where dag_id = ${dagId} and key = 'c'`);
    expect(rows[0]!.deps_remaining).toBe(2);
  });

  it('two concurrent transactions adding a→b and b→a never both succeed', async () => {
    const conns = await Promise.all([0, 1].map(() => databaseOpen({ url: database.url, migrate: false, poolSize: 1 })));
    let refused = 0;
    for (let round = 0; round < 25; round++) {
      const dagId = await dagCreate(db, `name: race-${round}\ntasks:\n  a: { type: t }\n  b: { type: t }\n`);
      const results = await Promise.allSettled([
        dagEdgesAdd(conns[0]!.db, dagId, [{ upstream: 'a', downstream: 'b' }]),
        dagEdgesAdd(conns[1]!.db, dagId, [{ upstream: 'b', downstream: 'a' }]),
      ]);
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      expect(ok).toBe(1);
      const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(failed.reason).toBeInstanceOf(CycleError);
      refused++;
      const edges = await edgeListForDag(db, dagId);
      expect(edges).toHaveLength(1);
      expect(cycleFind(dagGraphBuild(['a', 'b'], edges.map((e) => [e.upstreamKey, e.downstreamKey] as const)))).toBeUndefined();
    }
    expect(refused).toBe(25);
    await Promise.all(conns.map((c) => c.close()));
  });

  it('the database refuses an edge whose task is missing or in another DAG (a statement-level check, not foreign keys)', async () => {
    const one = await dagCreate(db, 'name: one\ntasks:\n  a: { type: t }\n  b: { type: t }\n');
    const other = await dagCreate(db, 'name: other\ntasks:\n  x: { type: t }\n');
    const id = async (dagId: string, key: string) =>
      (await db.execute<{ id: string }>(sql`select id from tasks where dag_id = ${dagId} and key = ${key}`)).rows[0]!.id;
    const [a, b, x] = [await id(one, 'a'), await id(one, 'b'), await id(other, 'x')];
    const insert = (rows: Array<[string, string, string]>) => edgeInsertMany(db, rows.map(([dagId, upstreamId, downstreamId]) => ({ dagId, upstreamId, downstreamId })));
    const before = await databaseSnapshot(db);
    for (const rows of [[[one, a, 'missing']], [[one, x, b]], [[other, a, b]], [[one, a, b], [one, 'missing', b]]] as Array<Array<[string, string, string]>>) {
      const err = (await insert(rows).catch((e) => e)) as { cause?: { code?: string; message?: string } };
      expect(err.cause, JSON.stringify(rows)).toMatchObject({ code: '23503', message: expect.stringMatching(/names a task that is not in DAG/) });
    }
    expect(await databaseSnapshot(db)).toBe(before);
    await insert([[one, a, b]]);
    expect(await edgeListForDag(db, one)).toEqual([expect.objectContaining({ upstreamKey: 'a', downstreamKey: 'b' })]);
  });
});
