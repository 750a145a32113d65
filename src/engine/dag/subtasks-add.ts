import { dagLockGraph, dagTasksAdded } from '../../db/queries/dags.js';
import { edgeInsertMany, edgeListForDag } from '../../db/queries/edges.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { MAP_WAIT_PREFIX } from '../../db/queries/signals.js';
import { taskActivateCreated, taskInsertMany } from '../../db/queries/tasks-intake.js';
import { taskGraphRows } from '../../db/queries/tasks-read.js';
import { taskChildOutputs, taskUpstreamsHold } from '../../db/queries/tasks-spawn.js';
import { taskRankGet } from '../../db/queries/tasks-priority.js';
import type { Db } from '../../db/handle.js';
import { ancestors } from '../../dag/graph.js';
import type { TaskSpec } from '../../dag/spec.js';
import { LIMITS, limitEnvName } from '../../config/index.js';
import { ConflictError, ForbiddenError, InvalidInputError } from '../../errors.js';
import { newTaskId } from '../../ids.js';
import { graphCheckAcyclic } from './graph-check.js';
import { taskRow } from '../attempt/task-row.js';
import { dagRanksRefresh, estimatesResolve } from './critical-path.js';

export interface SpawnedChild {
  /** The key given to spawn (`lint`); the DAG knows it as `<parent key>/lint`. */
  key: string;
  id: string;
  status: string;
  /** Present once the subtask has completed. */
  output?: unknown;
  /** False when a subtask with this key already existed under this parent (spawn is idempotent per key). */
  created: boolean;
}

export interface SubtasksAddOptions {
  /** The parent waits for the subtasks (those not yet completed): parentWait moves it, in the same transaction. */
  wait: boolean;
  parentWait: (children: number) => Promise<unknown>;
  /** Most subtasks agents may add to the DAG in all (its spawn policy); undefined: no limit but the DAG's. */
  spawnLimit?: number;
  /** task.spawned (an agent spawned them) or task.mapped (a for_each's children). */
  event: 'task.spawned' | 'task.mapped';
}

/**
 * Add subtasks under a parent the caller has locked, in its transaction: keys `<parent>/<key>`, idempotent per
 * parent; under the DAG's graph lock; each edge cycle-checked with the DAG's own; context refs checked to name
 * work done or upstream; the DAG's limits kept. The one path for subtasks an agent spawns and a for_each's children.
 */
export async function subtasksAdd(
  tx: Db, p: { id: string; dagId: string; key: string }, subtasks: TaskSpec[], opts: SubtasksAddOptions,
): Promise<{ children: SpawnedChild[]; waiting: boolean }> {
  await dagLockGraph(tx, p.dagId);
  const fullKey = (local: string) => `${p.key}/${local}`;
  const siblings = new Set(subtasks.map((s) => s.key));
  const siblingKeys = new Set(subtasks.map((s) => fullKey(s.key)));
  const resolve = (k: string) => (siblings.has(k) ? fullKey(k) : k);
  // Every existing task that may become an upstream (a named dependency, a child waited for again) is held
  // before the DAG is read, so the states read below stay true until this transaction commits.
  await taskUpstreamsHold(tx, p.dagId, [...new Set([...siblingKeys, ...subtasks.flatMap((s) => s.dependsOn.map(resolve))])]);
  // Keys, ids and states only: a DAG of many large outputs must not be read whole on every spawn.
  const rows = await taskGraphRows(tx, p.dagId);
  const byKey = new Map(rows.map((r) => [r.key, r]));

  const existing: SpawnedChild[] = [];
  const fresh: Array<TaskSpec & { id: string }> = [];
  const doneOutputs = await taskChildOutputs(tx, p.id, subtasks.map((s) => byKey.get(fullKey(s.key))?.id).filter((id): id is string => !!id));
  for (const s of subtasks) {
    const prior = byKey.get(fullKey(s.key));
    if (prior && prior.parentId !== p.id) throw new ConflictError(`task key ${fullKey(s.key)} is already used in DAG ${p.dagId}`);
    if (prior?.status === 'cancelled' && opts.wait) throw new InvalidInputError(`subtask ${s.key} was cancelled and will never complete: cannot wait for it`);
    if (prior) {
      existing.push({ key: s.key, id: prior.id, status: prior.status, created: false, ...(prior.status === 'completed' ? { output: doneOutputs.get(prior.id) ?? null } : {}) });
      continue;
    }
    const dependsOn = s.dependsOn.map(resolve);
    for (const d of dependsOn) {
      if (!byKey.has(d) && !siblingKeys.has(d)) {
        throw new InvalidInputError(`subtask ${s.key}: depends_on ${d} is neither a sibling nor a task of DAG ${p.dagId}`);
      }
      if (byKey.get(d)?.status === 'cancelled') throw new InvalidInputError(`subtask ${s.key}: depends_on ${d}, which is cancelled and will never complete`);
    }
    const context = s.body.context.map((ref) => {
      const [k, ...path] = ref.split('.');
      return [resolve(k!), ...path].join('.');
    });
    fresh.push({ ...s, key: fullKey(s.key), dependsOn, body: { ...s.body, context }, id: newTaskId() });
  }

  const waitFor = opts.wait
    ? [...existing.filter((c) => c.status !== 'completed').map((c) => c.id), ...fresh.map((f) => f.id)]
    : [];
  const idByKey = new Map([...rows.map((r) => [r.key, r.id] as const), ...fresh.map((f) => [f.key, f.id] as const)]);
  const keyById = new Map([...idByKey].map(([k, id]) => [id, k] as const));
  const newEdges = [
    ...fresh.flatMap((f) => f.dependsOn.map((d) => [d, f.key] as const)),
    ...waitFor.map((id) => [keyById.get(id)!, p.key] as const),
  ];
  const oldEdges = (await edgeListForDag(tx, p.dagId)).map((e) => [e.upstreamKey, e.downstreamKey] as const);
  if (oldEdges.length + newEdges.length > LIMITS.edgesPerDag) {
    throw new InvalidInputError(`spawn from ${p.key}: DAG ${p.dagId} has ${oldEdges.length} dependencies; ${newEdges.length} more would pass the limit of ${LIMITS.edgesPerDag} (${limitEnvName('edgesPerDag')})`);
  }
  const allKeys = [...byKey.keys(), ...fresh.map((f) => f.key)];
  const graph = await graphCheckAcyclic(allKeys, [...oldEdges, ...newEdges], `${opts.event === 'task.mapped' ? 'for_each' : 'spawn'} from ${p.key}: `);

  // Context refs must name work that is done or upstream, else the input would be missing at claim.
  // A task's ancestors are walked only when a ref names unfinished work (a walk per subtask over the
  // whole DAG made a 1,000-subtask spawn quadratic).
  for (const f of fresh) {
    let upstream: Set<string> | undefined;
    for (const ref of f.body.context) {
      const k = ref.split('.')[0]!;
      if (byKey.get(k)?.status === 'completed') continue;
      upstream ??= ancestors(graph, f.key);
      if (!upstream.has(k)) {
        throw new InvalidInputError(`subtask ${f.key}: context ref ${ref} names ${k}, which is neither completed nor upstream of it`);
      }
    }
  }

  // What agents spawned counts against what the DAG lets them add; a for_each's children do not.
  const mapParents = new Set(rows.filter((r) => r.waitKey?.startsWith(MAP_WAIT_PREFIX)).map((r) => r.id));
  const spawnedBefore = rows.filter((r) => r.parentId !== null && !mapParents.has(r.parentId)).length;
  if (opts.spawnLimit !== undefined && spawnedBefore + fresh.length > opts.spawnLimit) {
    throw new ForbiddenError(`spawn from ${p.key}: DAG ${p.dagId} lets its agents add ${opts.spawnLimit} subtasks in all; ${spawnedBefore} exist and ${fresh.length} more were asked for`, { dagId: p.dagId });
  }
  // Counted from the rows read under the graph lock: the DAG row read before it may be stale by another spawn.
  if (rows.length + fresh.length > LIMITS.tasksPerDag) {
    throw new InvalidInputError(`spawn from ${p.key}: DAG ${p.dagId} has ${rows.length} tasks; ${fresh.length} more would pass the limit of ${LIMITS.tasksPerDag} (${limitEnvName('tasksPerDag')})`);
  }
  const open = (k: string) => byKey.get(k)?.status !== 'completed';
  const estimates = await estimatesResolve(tx, fresh);
  // Ranked from the start as dagRanksRefresh leaves them: never above the parent (their priority is stored as inserted).
  const parentRank = await taskRankGet(tx, p.id);
  await taskInsertMany(tx, fresh.map((f) => {
    const estimateSec = estimates.get(f.key)!;
    return { ...taskRow(f, p.dagId, f.id, p.id, { estimateSec, cpRankSec: Math.min(estimateSec, parentRank) }), depsRemaining: f.dependsOn.filter(open).length };
  }));
  await edgeInsertMany(tx, newEdges.map(([u, v]) => ({ dagId: p.dagId, upstreamId: idByKey.get(u)!, downstreamId: idByKey.get(v)! })));
  // The graph changed, by an agent's doing: the new tasks rank no higher than their parent, and none of the others rises.
  if (newEdges.length || fresh.length) await dagRanksRefresh(tx, p.dagId, { parentId: p.id, added: new Set(fresh.map((f) => f.id)) });
  if (fresh.length) {
    await dagTasksAdded(tx, p.dagId, fresh.length);
    await taskActivateCreated(tx, p.dagId);
  }
  const waiting = waitFor.length > 0;
  if (waiting) {
    await opts.parentWait(waitFor.length);
  }
  await eventInsertMany(tx, [
    ...(fresh.length ? [{ type: opts.event, dagId: p.dagId, taskId: p.id, data: { subtasks: fresh.map((f) => f.key), wait: !!opts.wait } }] : []),
    ...(waiting ? [{ type: 'task.waiting', dagId: p.dagId, taskId: p.id, data: { on: waitFor.length } }] : []),
  ]);
  const freshByKey = new Map(fresh.map((f) => [f.key, f]));
  const existingByKey = new Map(existing.map((c) => [c.key, c]));
  const children: SpawnedChild[] = subtasks.map((s) => {
    const f = freshByKey.get(fullKey(s.key));
    if (!f) return existingByKey.get(s.key)!;
    return { key: s.key, id: f.id, status: f.dependsOn.some(open) || f.notBefore ? 'pending' : 'ready', created: true };
  });
  return { children, waiting };
}
