import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagGet, dagLockGraph } from '../../db/queries/dags.js';
import { edgeInsertMany, edgeListForDag } from '../../db/queries/edges.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskDepsAdd } from '../../db/queries/task-deps.js';
import { taskGraphRows } from '../../db/queries/tasks-read.js';
import { taskUpstreamsHold } from '../../db/queries/tasks-spawn.js';
import { InvalidInputError, NotFoundError } from '../../errors.js';
import { graphCheckAcyclic } from './graph-check.js';
import { dagRanksRefresh } from './critical-path.js';

export interface EdgeByKey { upstream: string; downstream: string }

/**
 * Add dependency edges to an existing DAG. Under the DAG's graph lock, the
 * current graph is loaded and checked with the new edges, so concurrent callers
 * can never together create a cycle. A downstream task must not be claimed yet:
 * it waits (READY → PENDING) for each new upstream that has not completed.
 */
export async function dagEdgesAdd(db: Db, dagId: string, add: EdgeByKey[]): Promise<void> {
  await withTx(db, async (tx) => {
    if (!(await dagGet(tx, dagId))) throw new NotFoundError('DAG', dagId);
    await dagLockGraph(tx, dagId);
    // The new upstreams are held before the DAG is read: the states read stay true until commit (see taskUpstreamsHold).
    await taskUpstreamsHold(tx, dagId, [...new Set(add.map((e) => e.upstream))]);
    const taskRows = await taskGraphRows(tx, dagId);
    const byKey = new Map(taskRows.map((t) => [t.key, t]));
    for (const e of add) {
      for (const k of [e.upstream, e.downstream]) if (!byKey.has(k)) throw new NotFoundError(`task in DAG ${dagId}`, k);
      const up = byKey.get(e.upstream)!;
      if (up.status === 'cancelled') {
        throw new InvalidInputError(`cannot make ${e.downstream} wait for ${e.upstream}: ${e.upstream} is cancelled and will never complete`);
      }
    }
    const existing = await edgeListForDag(tx, dagId);
    await graphCheckAcyclic(
      [...byKey.keys()],
      [...existing.map((e) => [e.upstreamKey, e.downstreamKey] as const), ...add.map((e) => [e.upstream, e.downstream] as const)],
    );
    const had = new Set(existing.map((x) => `${x.upstreamKey}\n${x.downstreamKey}`));
    const fresh = add.filter((e) => !had.has(`${e.upstream}\n${e.downstream}`));
    await edgeInsertMany(tx, fresh.map((e) => ({ dagId, upstreamId: byKey.get(e.upstream)!.id, downstreamId: byKey.get(e.downstream)!.id })));
    const waits = new Map<string, number>();
    for (const e of fresh) {
      if (byKey.get(e.upstream)!.status === 'completed') continue;
      const id = byKey.get(e.downstream)!.id;
      waits.set(id, (waits.get(id) ?? 0) + 1);
    }
    for (const [id, n] of waits) {
      if (!(await taskDepsAdd(tx, id, n))) {
        const t = taskRows.find((r) => r.id === id)!;
        throw new InvalidInputError(`cannot make ${t.key} wait for new upstream tasks: it is no longer waiting to run (${t.status})`);
      }
    }
    if (fresh.length) await dagRanksRefresh(tx, dagId);
    await eventInsertMany(tx, [{ type: 'dag.edges_added', dagId, data: { edges: fresh } }]);
  });
}
